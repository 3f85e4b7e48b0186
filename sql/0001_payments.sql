-- 0001: the accept path. A payment, its outbox row and its idempotency record
-- are written by one transaction (accept_payment), so a 202 always means all three.

CREATE TABLE payments (
    payment_id    text        PRIMARY KEY,
    event_id      text        NOT NULL UNIQUE,
    method        text        NOT NULL CHECK (method IN ('pix', 'ted', 'card')),
    decision      text        NOT NULL CHECK (decision IN ('approved', 'refused')),
    amount_cents  bigint      NOT NULL CHECK (amount_cents BETWEEN 0 AND 10000000000000),
    currency      text        NOT NULL CHECK (currency = 'BRL'),
    payee_bank    text        NOT NULL,
    payee_account text        NOT NULL,
    decided_at    timestamptz,
    status        text        NOT NULL DEFAULT 'accepted'
                  CHECK (status IN ('accepted', 'published', 'unroutable', 'retrying',
                                    'settled', 'dead_lettered')),
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    settled_at    timestamptz
);

-- A status only moves forward; writers guard their UPDATE with this rank.
CREATE FUNCTION payment_status_rank(s text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE s
        WHEN 'accepted' THEN 0
        WHEN 'published' THEN 1
        WHEN 'unroutable' THEN 1
        WHEN 'retrying' THEN 2
        WHEN 'settled' THEN 3
        WHEN 'dead_lettered' THEN 3
    END
$$;

-- The replayable answer of each accepted event, kept at least 7 days.
CREATE TABLE idempotency_keys (
    event_id        text        PRIMARY KEY,
    fingerprint     bytea       NOT NULL,
    payment_id      text        NOT NULL,
    response_status integer     NOT NULL,
    response_body   text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL DEFAULT now() + interval '7 days'
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

-- The transactional outbox: one row per accepted event, drained by payments-relay.
CREATE TABLE outbox (
    id               bigserial   PRIMARY KEY,
    event_id         text        NOT NULL UNIQUE,
    payment_id       text        NOT NULL,
    routing_key      text        NOT NULL,
    body             text        NOT NULL,
    traceparent      text,
    state            text        NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'published', 'unroutable')),
    publish_attempts integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    published_at     timestamptz
);
CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending';

-- accept_payment: the whole accept in one round trip, inside the caller's transaction.
-- outcome is one of:
--   accepted         rows written; response_body is p_response
--   replay           same event, same fingerprint; response_body is the stored answer
--   key_reused       same event, another fingerprint
--   in_flight        another transaction holds this event right now
--   payment_decided  the payment already has a decision from another event
CREATE FUNCTION accept_payment(
    p_event_id text, p_payment_id text, p_method text, p_decision text,
    p_amount_cents bigint, p_currency text, p_payee_bank text, p_payee_account text,
    p_decided_at timestamptz, p_fingerprint bytea, p_body text, p_traceparent text,
    p_response text)
RETURNS TABLE (outcome text, response_body text)
LANGUAGE plpgsql AS $$
DECLARE
    k idempotency_keys%ROWTYPE;
BEGIN
    -- Held until COMMIT/ROLLBACK: a second request for the same event sees it busy.
    IF NOT pg_try_advisory_xact_lock(hashtextextended(p_event_id, 0)) THEN
        RETURN QUERY SELECT 'in_flight'::text, NULL::text;
        RETURN;
    END IF;

    SELECT * INTO k FROM idempotency_keys i WHERE i.event_id = p_event_id;
    IF FOUND THEN
        IF k.fingerprint = p_fingerprint THEN
            RETURN QUERY SELECT 'replay'::text, k.response_body;
        ELSE
            RETURN QUERY SELECT 'key_reused'::text, NULL::text;
        END IF;
        RETURN;
    END IF;

    INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, currency,
                          payee_bank, payee_account, decided_at)
    VALUES (p_payment_id, p_event_id, p_method, p_decision, p_amount_cents, p_currency,
            p_payee_bank, p_payee_account, p_decided_at)
    ON CONFLICT (payment_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'payment_decided'::text, NULL::text;
        RETURN;
    END IF;

    INSERT INTO outbox (event_id, payment_id, routing_key, body, traceparent)
    VALUES (p_event_id, p_payment_id, 'payment.' || p_method || '.' || p_decision, p_body,
            p_traceparent);

    INSERT INTO idempotency_keys (event_id, fingerprint, payment_id, response_status, response_body)
    VALUES (p_event_id, p_fingerprint, p_payment_id, 202, p_response);

    RETURN QUERY SELECT 'accepted'::text, p_response;
END
$$;
