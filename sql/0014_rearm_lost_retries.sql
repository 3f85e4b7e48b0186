-- 0014: a retry copy that never came back is published again, from the outbox.
-- A classic queue dead-letters at most once: a retry copy whose delay ends while
-- payments.settlement is full (x-max-length with reject-publish) is dropped by the broker, and a
-- node that dies while dead-lettering loses it too. The payment then stays 'retrying' for ever.
-- The worker notes each retry in retry_waits (PAYMENT_STATUS_SQL_RETRYING, shared/payment_status.h);
-- the relay calls rearm_lost_retries() every few seconds: a payment still 'retrying' longer
-- than the delays allow gets its outbox row back to 'pending', carrying the next attempt, and
-- the relay publishes it again under confirms (docs/decisions.md, decision 21). If the copy was
-- only late, the worker's inbox makes the second one a duplicate.
--
-- Why a table and not an index on payments: any index whose columns or predicate include
-- status or updated_at turns every settle's UPDATE of payments into a non-HOT update
-- (measured: the worker's drain fell from about 9,000 to 2,000 events/s; decision 17).

ALTER TABLE outbox ADD COLUMN attempt integer NOT NULL DEFAULT 1 CHECK (attempt >= 1);

-- Payments that were sent to a delay queue, and since when. Rows of payments that settled or
-- were dead-lettered since are deleted by rearm_lost_retries(): the table stays small.
CREATE TABLE retry_waits (
    payment_id text        PRIMARY KEY,
    since      timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE ON retry_waits TO paygw_worker;
GRANT SELECT, UPDATE, DELETE ON retry_waits TO paygw_relay;

CREATE FUNCTION rearm_lost_retries(p_after_seconds integer, p_limit integer)
RETURNS integer
LANGUAGE sql AS $$
    WITH done AS ( -- settled or dead-lettered since: nothing to wait for
        DELETE FROM retry_waits w
         USING payments p
         WHERE p.payment_id = w.payment_id AND p.status <> 'retrying'
    ), lost AS (
        SELECT w.payment_id, p.event_id, p.attempts
          FROM retry_waits w
          JOIN payments p ON p.payment_id = w.payment_id
         WHERE p.status = 'retrying'
           AND w.since < now() - make_interval(secs => p_after_seconds)
         ORDER BY w.since
         LIMIT p_limit
           FOR UPDATE OF w SKIP LOCKED
    ), rearmed AS (
        UPDATE outbox o
           SET state = 'pending', attempt = lost.attempts + 1, next_attempt_at = now(),
               publish_attempts = 0, published_at = NULL,
               last_error = format('retry copy of attempt %s lost: published again', lost.attempts)
          FROM lost
         WHERE o.event_id = lost.event_id AND o.state = 'published'
        RETURNING o.event_id
    ), waited AS ( -- the clock starts again: one more publish per period, not one per call
        UPDATE retry_waits w SET since = now()
          FROM lost
         WHERE w.payment_id = lost.payment_id
    )
    SELECT count(*)::integer FROM rearmed; -- (every data-modifying WITH runs, read or not)
$$;

COMMENT ON FUNCTION rearm_lost_retries(integer, integer) IS
    'Publishes again (outbox row back to pending, attempt = attempts + 1) the payments retrying '
    'for longer than p_after_seconds; returns how many. Called by payments-relay. sql/0014.';

REVOKE EXECUTE ON FUNCTION rearm_lost_retries(integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rearm_lost_retries(integer, integer) TO paygw_relay;
