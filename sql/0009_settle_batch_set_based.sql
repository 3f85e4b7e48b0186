-- 0009: the settle batch as one set-based statement instead of settle_payment()
-- per row, for the reason 0008 gave for the accept: one executor and one pass
-- over each table's constraints per batch, not per item. The outcomes are those
-- of settle_payment(), item by item:
--
--   unknown_payment  no payment with this payment_id and event_id
--   terminal         the payment is dead-lettered: nothing is written
--   duplicate        the inbox already holds the event (ON CONFLICT DO NOTHING)
--   settled          inbox row, two ledger lines, the payment settled
--
-- The payments are locked (FOR UPDATE) in payment_id order, as the caller sorts
-- its items, so two workers' batches cannot deadlock. A batch that holds one
-- event_id twice (a redelivery next to its original) runs settle_payment() row
-- by row, as before: there the second item must see what the first wrote.
CREATE OR REPLACE FUNCTION settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, outcome text, seconds double precision)
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(DISTINCT a.v->>'event_id') FROM jsonb_array_elements(p_items) AS a(v))
       <> jsonb_array_length(p_items) THEN
        RETURN QUERY
        SELECT (j.o - 1)::integer, s.outcome, s.seconds
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS j(v, o),
               LATERAL settle_payment(j.v->>'event_id', j.v->>'payment_id',
                                      (j.v->>'attempt')::integer) s
         ORDER BY j.o;
        RETURN;
    END IF;

    RETURN QUERY
    WITH item AS MATERIALIZED (
        SELECT (a.o - 1)::integer AS idx, a.v->>'event_id' AS event_id,
               a.v->>'payment_id' AS payment_id, (a.v->>'attempt')::integer AS attempt
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS a(v, o)
    ),
    locked AS MATERIALIZED (
        SELECT i.idx, i.event_id, i.payment_id, i.attempt, p.method, p.amount_cents,
               p.payee_bank, p.payee_account, p.status, p.created_at
          FROM item i JOIN payments p ON p.payment_id = i.payment_id AND p.event_id = i.event_id
         ORDER BY p.payment_id COLLATE "C"
           FOR UPDATE OF p
    ),
    new_inbox AS (
        INSERT INTO inbox (event_id, payment_id, attempt)
        SELECT l.event_id, l.payment_id, l.attempt
          FROM locked l
         WHERE l.status <> 'dead_lettered'
         ORDER BY l.idx
        ON CONFLICT (event_id) DO NOTHING
        RETURNING inbox.event_id
    ),
    new_ledger AS (
        INSERT INTO ledger_entries (event_id, payment_id, account, side, amount_cents)
        SELECT l.event_id, l.payment_id, e.account, e.side, l.amount_cents
          FROM locked l
          JOIN new_inbox n ON n.event_id = l.event_id
         CROSS JOIN LATERAL (VALUES (1, 'clearing:' || l.method, 'debit'),
                                    (2, 'payee:' || l.payee_bank || '/' || l.payee_account,
                                     'credit')) AS e(nth, account, side)
         ORDER BY l.idx, e.nth
    ),
    settled AS (
        UPDATE payments p
           SET status = 'settled', attempts = l.attempt, last_error = NULL,
               settled_at = now(), updated_at = now()
          FROM locked l
          JOIN new_inbox n ON n.event_id = l.event_id
         WHERE p.payment_id = l.payment_id
    )
    SELECT i.idx,
           CASE WHEN l.idx IS NULL THEN 'unknown_payment'
                WHEN l.status = 'dead_lettered' THEN 'terminal'
                WHEN n.event_id IS NULL THEN 'duplicate'
                ELSE 'settled' END,
           CASE WHEN n.event_id IS NOT NULL
                THEN extract(epoch FROM now() - l.created_at)::double precision END
      FROM item i
      LEFT JOIN locked l ON l.idx = i.idx
      LEFT JOIN new_inbox n ON n.event_id = l.event_id
     ORDER BY i.idx;
END
$$;
