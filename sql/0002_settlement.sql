-- 0002: settlement. The inbox row and the ledger lines of an event are written
-- by one transaction (settle_payment), so an event has at most one effect.

-- One row per event whose effect is committed; the unique key is the dedup.
CREATE TABLE inbox (
    event_id     text        PRIMARY KEY,
    payment_id   text        NOT NULL,
    attempt      integer     NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
);

-- Append-only double entry: every event writes one debit and one credit of
-- the same amount. No balance row is updated per payment, so parallel workers
-- never queue on one hot row; balances are sums.
CREATE TABLE ledger_entries (
    id           bigserial   PRIMARY KEY,
    event_id     text        NOT NULL,
    payment_id   text        NOT NULL,
    account      text        NOT NULL,
    side         text        NOT NULL CHECK (side IN ('debit', 'credit')),
    amount_cents bigint      NOT NULL CHECK (amount_cents >= 0),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_event ON ledger_entries (event_id);
CREATE INDEX ledger_entries_account ON ledger_entries (account);

-- settle_payment: the whole effect in one round trip, inside the caller's transaction.
-- outcome is one of:
--   settled          inbox row, two ledger lines and the payment settled; seconds is accept-to-settle
--   duplicate        the inbox already has this event: the effect happened before
--   unknown_payment  no payment with this id and event (the caller rolls back)
--   terminal         the payment is already dead-lettered (the caller rolls back)
CREATE FUNCTION settle_payment(p_event_id text, p_payment_id text, p_attempt integer)
RETURNS TABLE (outcome text, seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    p payments%ROWTYPE;
BEGIN
    INSERT INTO inbox (event_id, payment_id, attempt)
    VALUES (p_event_id, p_payment_id, p_attempt)
    ON CONFLICT (event_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'duplicate'::text, NULL::double precision;
        RETURN;
    END IF;

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
