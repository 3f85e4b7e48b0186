-- 0008: the accept batch as two set-based statements instead of accept_payment()
-- per row. Per row, each of its five statements started an executor of its own,
-- and every INSERT parsed the table's CHECK constraints again from the catalog;
-- that was a third of PostgreSQL's CPU per accept. Now each table gets one
-- INSERT per batch. The outcomes are those of accept_payment(), row by row:
--
--   1. Try the advisory lock of every event_id in the batch (a lock another
--      transaction holds means 'in_flight'). This is its own statement so that
--      the next one takes its snapshot after the locks are held: an event whose
--      holder has just committed is then seen as a replay, not as a new event.
--   2. Look the locked events up in idempotency_keys ('replay'/'key_reused'),
--      insert the payments of the unknown ones (ON CONFLICT: 'payment_decided'),
--      and the outbox and idempotency rows of the payments just inserted.
--
-- The caller sorts the items by payment_id and the INSERT takes them in that
-- order, so two batches wait on each other's keys in one order and cannot
-- deadlock. A batch that holds one event_id twice (a client retrying while its
-- first request is still queued) is rare, and there the later item's outcome
-- depends on what the earlier one wrote; such a batch runs accept_payment() row
-- by row, as before.
CREATE OR REPLACE FUNCTION accept_batch(p_jobs jsonb)
RETURNS TABLE (idx integer, outcome text, response_body text)
LANGUAGE plpgsql AS $$
DECLARE
    v_locked text[];
BEGIN
    IF (SELECT count(DISTINCT a.v->>'event_id') FROM jsonb_array_elements(p_jobs) AS a(v))
       <> jsonb_array_length(p_jobs) THEN
        RETURN QUERY
        SELECT (j.o - 1)::integer, r.outcome, r.response_body
          FROM jsonb_array_elements(p_jobs) WITH ORDINALITY AS j(v, o),
               LATERAL accept_payment(j.v->>'event_id', j.v->>'payment_id', j.v->>'method',
                                      j.v->>'decision', (j.v->>'amount_cents')::bigint,
                                      j.v->>'currency', j.v->>'payee_bank', j.v->>'payee_account',
                                      (j.v->>'decided_at')::timestamptz,
                                      decode(j.v->>'fingerprint', 'hex'), j.v->>'body',
                                      j.v->>'traceparent', j.v->>'response') r
         ORDER BY j.o;
        RETURN;
    END IF;

    SELECT coalesce(array_agg(e.event_id), '{}') INTO v_locked
      FROM (SELECT DISTINCT a.v->>'event_id' AS event_id
              FROM jsonb_array_elements(p_jobs) AS a(v)) e
     WHERE pg_try_advisory_xact_lock(hashtextextended(e.event_id, 0));

    RETURN QUERY
    WITH item AS MATERIALIZED (   -- each item, and what is known of its event
        SELECT (a.o - 1)::integer AS idx, a.v->>'event_id' AS event_id,
               a.v->>'payment_id' AS payment_id, decode(a.v->>'fingerprint', 'hex') AS fp,
               a.v->>'response' AS response, a.v,
               a.v->>'event_id' = ANY (v_locked) AS locked,
               k.event_id IS NOT NULL AS known, k.fingerprint AS k_fp,
               k.response_body AS k_response
          FROM jsonb_array_elements(p_jobs) WITH ORDINALITY AS a(v, o)
          LEFT JOIN idempotency_keys k
                 ON k.event_id = a.v->>'event_id' AND a.v->>'event_id' = ANY (v_locked)
),
    new_payment AS (
        INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, currency,
                              payee_bank, payee_account, decided_at)
        SELECT h.payment_id, h.event_id, h.v->>'method', h.v->>'decision',
               (h.v->>'amount_cents')::bigint, h.v->>'currency', h.v->>'payee_bank',
               h.v->>'payee_account', (h.v->>'decided_at')::timestamptz
          FROM item h
         WHERE h.locked AND NOT h.known
         ORDER BY h.idx
        ON CONFLICT (payment_id) DO NOTHING
        RETURNING payments.event_id
),
    new_outbox AS (
        INSERT INTO outbox (event_id, payment_id, routing_key, body, traceparent)
        SELECT h.event_id, h.payment_id,
               'payment.' || (h.v->>'method') || '.' || (h.v->>'decision'),
               h.v->>'body', h.v->>'traceparent'
          FROM item h JOIN new_payment n ON n.event_id = h.event_id
         ORDER BY h.idx
),
    new_key AS (
        INSERT INTO idempotency_keys (event_id, fingerprint, payment_id, response_status,
                                      response_body)
        SELECT h.event_id, h.fp, h.payment_id, 202, h.response
          FROM item h JOIN new_payment n ON n.event_id = h.event_id
)
    SELECT h.idx,
           CASE WHEN NOT h.locked THEN 'in_flight'
                WHEN h.known AND h.k_fp = h.fp THEN 'replay'
                WHEN h.known THEN 'key_reused'
                WHEN n.event_id IS NOT NULL THEN 'accepted'
                ELSE 'payment_decided' END,
           CASE WHEN h.known AND h.k_fp = h.fp THEN h.k_response
                WHEN NOT h.known AND n.event_id IS NOT NULL THEN h.response END
      FROM item h LEFT JOIN new_payment n ON n.event_id = h.event_id
     ORDER BY h.idx;
END
$$;
