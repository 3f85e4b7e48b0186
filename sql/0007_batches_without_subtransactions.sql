-- 0007: batches without a subtransaction per row. An EXCEPTION block per row made
-- every item a subtransaction; past 64 of them a backend's subtransaction cache
-- overflows and every snapshot in the cluster gets slower. Expected outcomes never
-- raise (they are returned), so the batch runs plainly; when an unexpected error
-- aborts it, the caller runs each item again on its own, so a bad row still never
-- fails its neighbours. Callers sort items by payment_id, so two batches lock rows
-- in the same order and cannot deadlock.

CREATE OR REPLACE FUNCTION accept_batch(p_jobs jsonb)
RETURNS TABLE (idx integer, outcome text, response_body text)
LANGUAGE sql AS $$
    SELECT (j.ordinality - 1)::integer, a.outcome, a.response_body
      FROM jsonb_array_elements(p_jobs) WITH ORDINALITY AS j(value, ordinality),
           LATERAL accept_payment(j.value->>'event_id', j.value->>'payment_id',
                                  j.value->>'method', j.value->>'decision',
                                  (j.value->>'amount_cents')::bigint, j.value->>'currency',
                                  j.value->>'payee_bank', j.value->>'payee_account',
                                  (j.value->>'decided_at')::timestamptz,
                                  decode(j.value->>'fingerprint', 'hex'), j.value->>'body',
                                  j.value->>'traceparent', j.value->>'response') a
     ORDER BY j.ordinality
$$;

-- The payment is locked and checked before the inbox row is written, so the
-- outcomes that write nothing (unknown_payment, terminal) need no undo.
CREATE OR REPLACE FUNCTION settle_payment(p_event_id text, p_payment_id text, p_attempt integer)
RETURNS TABLE (outcome text, seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    p payments%ROWTYPE;
BEGIN
    SELECT * INTO p FROM payments
     WHERE payment_id = p_payment_id AND event_id = p_event_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unknown_payment'::text, NULL::double precision;
        RETURN;
    END IF;
    IF p.status = 'dead_lettered' THEN
        RETURN QUERY SELECT 'terminal'::text, NULL::double precision;
        RETURN;
    END IF;

    INSERT INTO inbox (event_id, payment_id, attempt)
    VALUES (p_event_id, p_payment_id, p_attempt)
    ON CONFLICT (event_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'duplicate'::text, NULL::double precision;
        RETURN;
    END IF;

    INSERT INTO ledger_entries (event_id, payment_id, account, side, amount_cents)
    VALUES (p_event_id, p_payment_id, 'clearing:' || p.method, 'debit', p.amount_cents),
           (p_event_id, p_payment_id, 'payee:' || p.payee_bank || '/' || p.payee_account,
            'credit', p.amount_cents);

    UPDATE payments
       SET status = 'settled', attempts = p_attempt, last_error = NULL,
           settled_at = now(), updated_at = now()
     WHERE payment_id = p_payment_id;

    RETURN QUERY SELECT 'settled'::text, extract(epoch FROM now() - p.created_at)::double precision;
END
$$;

CREATE OR REPLACE FUNCTION settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, outcome text, seconds double precision)
LANGUAGE sql AS $$
    SELECT (j.ordinality - 1)::integer, s.outcome, s.seconds
      FROM jsonb_array_elements(p_items) WITH ORDINALITY AS j(value, ordinality),
           LATERAL settle_payment(j.value->>'event_id', j.value->>'payment_id',
                                  (j.value->>'attempt')::integer) s
     ORDER BY j.ordinality
$$;
