-- 0015: the HTTP bank's reference for a payment settled through it (contract section 12).
-- payments.bank_reference is NULL until the worker settles the payment on the bank's
-- "executed"; it is written by settle_batch() in the same UPDATE as the status, so it comes
-- with the inbox row and the ledger lines or not at all. Not indexed: an indexed column would
-- make every settle's UPDATE a non-HOT update (decision 21); reconciliation scans settled rows.
ALTER TABLE payments ADD COLUMN bank_reference text;
GRANT UPDATE (bank_reference) ON payments TO paygw_worker;

-- settle_batch (sql/0013) taking an item's "bank_reference" (absent or null: the built-in
-- simulation, which has none). Everything else is unchanged.
CREATE OR REPLACE FUNCTION settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, outcome text, seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_new text[]; -- the events whose inbox row this batch inserted
    v_events bigint;
    v_attempt integer;
BEGIN
    -- Every attempt must be an integer, as settle_payment()'s signature requires even of an
    -- item whose payment is unknown: the cast fails the batch here, not half-way.
    SELECT count(DISTINCT a.v->>'event_id'), min((a.v->>'attempt')::integer)
      INTO v_events, v_attempt
      FROM jsonb_array_elements(p_items) AS a(v);
    IF v_events <> jsonb_array_length(p_items) THEN
        RETURN QUERY
        SELECT (j.o - 1)::integer, s.outcome, s.seconds
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS j(v, o),
               LATERAL settle_payment(j.v->>'event_id', j.v->>'payment_id',
                                      (j.v->>'attempt')::integer) s
         ORDER BY j.o;
        -- the reference of the copy that settled (settle_payment() does not take one)
        UPDATE payments p
           SET bank_reference = a.v->>'bank_reference'
          FROM jsonb_array_elements(p_items) AS a(v)
         WHERE p.event_id = a.v->>'event_id' AND p.status = 'settled'
           AND p.bank_reference IS NULL AND a.v->>'bank_reference' IS NOT NULL;
        RETURN;
    END IF;

    -- Lock the known payments, then insert the inbox rows of those that may settle.
    WITH locked AS MATERIALIZED (
        SELECT (a.o - 1)::integer AS idx, p.event_id, p.payment_id,
               (a.v->>'attempt')::integer AS attempt, p.status
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS a(v, o)
          JOIN payments p ON p.event_id = a.v->>'event_id' AND p.payment_id = a.v->>'payment_id'
         ORDER BY p.payment_id COLLATE "C"
           FOR UPDATE OF p
    ),
    new_inbox AS (
        INSERT INTO inbox (event_id, payment_id, attempt)
        SELECT l.event_id, l.payment_id, l.attempt
          FROM locked l
         WHERE payment_may_move(l.status, 'settled')
         ORDER BY l.idx
        ON CONFLICT (event_id) DO NOTHING
        RETURNING inbox.event_id
    )
    SELECT coalesce(array_agg(n.event_id), '{}') INTO v_new FROM new_inbox n;

    -- The ledger lines of the events settled now, in item order, debit before credit.
    INSERT INTO ledger_entries (event_id, payment_id, account, side, amount_cents)
    SELECT p.event_id, p.payment_id, e.account, e.side, p.amount_cents
      FROM jsonb_array_elements(p_items) WITH ORDINALITY AS a(v, o)
      JOIN payments p ON p.event_id = a.v->>'event_id'
     CROSS JOIN LATERAL (VALUES (1, 'clearing:' || p.method, 'debit'),
                                (2, 'payee:' || p.payee_bank || '/' || p.payee_account,
                                 'credit')) AS e(nth, account, side)
     WHERE p.event_id = ANY (v_new)
     ORDER BY a.o, e.nth;

    UPDATE payments p
       SET status = 'settled', attempts = (a.v->>'attempt')::integer, last_error = NULL,
           settled_at = now(), updated_at = now(), bank_reference = a.v->>'bank_reference'
      FROM jsonb_array_elements(p_items) AS a(v)
     WHERE p.event_id = a.v->>'event_id' AND p.event_id = ANY (v_new)
       AND payment_may_move(p.status, 'settled');

    RETURN QUERY
    SELECT (a.o - 1)::integer,
           CASE WHEN p.payment_id IS NULL THEN 'unknown_payment'
                WHEN p.event_id = ANY (v_new) THEN 'settled'
                WHEN p.status = 'dead_lettered' THEN 'terminal'
                ELSE 'duplicate' END,
           CASE WHEN p.event_id = ANY (v_new)
                THEN extract(epoch FROM now() - p.created_at)::double precision END
      FROM jsonb_array_elements(p_items) WITH ORDINALITY AS a(v, o)
      LEFT JOIN payments p ON p.event_id = a.v->>'event_id' AND p.payment_id = a.v->>'payment_id'
     ORDER BY a.o;
END
$$;
