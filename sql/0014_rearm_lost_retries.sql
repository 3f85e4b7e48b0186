-- 0014: a retry copy that never came back is published again, from the outbox.
-- A classic queue dead-letters at most once: a retry copy whose delay ends while
-- payments.settlement is full (x-max-length with reject-publish, sql has no say in it) is
-- dropped by the broker, and a node that dies while dead-lettering loses it too. The payment
-- then stays 'retrying' for ever. The relay calls rearm_lost_retries() every few seconds: a
-- payment 'retrying' for longer than the delays allow gets its outbox row back to 'pending',
-- carrying the next attempt, and the relay publishes it again under confirms (docs/decisions.md,
-- decision 21). If the copy was only late, the worker's inbox makes the second one a duplicate.

ALTER TABLE outbox ADD COLUMN attempt integer NOT NULL DEFAULT 1 CHECK (attempt >= 1);

-- only the few payments waiting for a retry: the relay's scan stays small on a big table
CREATE INDEX payments_retrying ON payments (updated_at) WHERE status = 'retrying';

CREATE FUNCTION rearm_lost_retries(p_after_seconds integer, p_limit integer)
RETURNS integer
LANGUAGE sql AS $$
    WITH lost AS (
        SELECT payment_id, event_id, attempts
          FROM payments
         WHERE status = 'retrying'
           AND updated_at < now() - make_interval(secs => p_after_seconds)
         ORDER BY updated_at
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    ), rearmed AS (
        UPDATE outbox o
           SET state = 'pending', attempt = lost.attempts + 1, next_attempt_at = now(),
               publish_attempts = 0, published_at = NULL,
               last_error = format('retry copy of attempt %s lost: published again', lost.attempts)
          FROM lost
         WHERE o.event_id = lost.event_id AND o.state = 'published'
        RETURNING o.event_id
    ), waited AS ( -- the clock starts again: one more publish per period, not one per call
        UPDATE payments p SET updated_at = now()
          FROM lost
         WHERE p.payment_id = lost.payment_id
        RETURNING p.payment_id
    )
    SELECT count(*)::integer FROM rearmed; -- (every data-modifying WITH runs, read or not)
$$;

COMMENT ON FUNCTION rearm_lost_retries(integer, integer) IS
    'Publishes again (outbox row back to pending, attempt = attempts + 1) the payments retrying '
    'for longer than p_after_seconds; returns how many. Called by payments-relay. sql/0014.';

REVOKE EXECUTE ON FUNCTION rearm_lost_retries(integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rearm_lost_retries(integer, integer) TO paygw_relay;
