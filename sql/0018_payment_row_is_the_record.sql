-- 0018: the payment row is the idempotency record (issue 17: fewer writes per payment).
--
-- Since 0011 a payment row carries the request's fingerprint, and the 202 body of an accepted
-- payment is rebuilt from it byte for byte (payment_accepted_body), so an event whose record
-- has expired is answered exactly as one whose record lives. The idempotency_keys row written
-- beside every payment therefore said nothing the payment row does not: it cost each accept a
-- third tuple and two index entries (one of them in a random place of a text primary key), and
-- later the API's expiry purge and an autovacuum of its own. From now on an accept writes the
-- payment and its outbox row only; the record of an event is its payment row, kept as long as
-- the payment (the contract's "at least 7 days"). The records written before this migration are
-- still read first until they expire, so their answers do not change.

CREATE OR REPLACE FUNCTION accept_payment(
    p_event_id text, p_payment_id text, p_method text, p_decision text,
    p_amount_cents bigint, p_currency text, p_payee_bank text, p_payee_account text,
    p_decided_at timestamptz, p_fingerprint bytea, p_body text, p_traceparent text,
    p_response text)
RETURNS TABLE (outcome text, response_body text)
LANGUAGE plpgsql AS $$
DECLARE
    k idempotency_keys%ROWTYPE;
    p payments%ROWTYPE;
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

    -- No record (it expired, or the payment was accepted after 0018): the payment row is one.
    SELECT * INTO p FROM payments x WHERE x.event_id = p_event_id;
    IF FOUND THEN
        IF payment_same_request(p, p_fingerprint, p_payment_id, p_method, p_decision,
                                p_amount_cents, p_currency, p_payee_bank, p_payee_account,
                                p_decided_at) THEN
            RETURN QUERY SELECT 'replay'::text, payment_accepted_body(p.event_id, p.payment_id);
        ELSE
            RETURN QUERY SELECT 'key_reused'::text, NULL::text;
        END IF;
        RETURN;
    END IF;

    INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, currency,
                          payee_bank, payee_account, decided_at, fingerprint)
    VALUES (p_payment_id, p_event_id, p_method, p_decision, p_amount_cents, p_currency,
            p_payee_bank, p_payee_account, p_decided_at, p_fingerprint)
    ON CONFLICT (payment_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'payment_decided'::text, NULL::text;
        RETURN;
    END IF;

    INSERT INTO outbox (event_id, payment_id, routing_key, body, traceparent)
    VALUES (p_event_id, p_payment_id, 'payment.' || p_method || '.' || p_decision, p_body,
            p_traceparent);

    RETURN QUERY SELECT 'accepted'::text, p_response;
END
$$;

-- As in 0011, without the idempotency_keys row.
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
               k.response_body AS k_response,
               p.event_id IS NOT NULL AS paid,
               p.event_id IS NOT NULL
               AND payment_same_request(p, decode(a.v->>'fingerprint', 'hex'),
                                        a.v->>'payment_id', a.v->>'method', a.v->>'decision',
                                        (a.v->>'amount_cents')::bigint, a.v->>'currency',
                                        a.v->>'payee_bank', a.v->>'payee_account',
                                        (a.v->>'decided_at')::timestamptz) AS p_same,
               payment_accepted_body(p.event_id, p.payment_id) AS p_response
          FROM jsonb_array_elements(p_jobs) WITH ORDINALITY AS a(v, o)
          LEFT JOIN idempotency_keys k
                 ON k.event_id = a.v->>'event_id' AND a.v->>'event_id' = ANY (v_locked)
          LEFT JOIN payments p
                 ON p.event_id = a.v->>'event_id' AND a.v->>'event_id' = ANY (v_locked)
                AND k.event_id IS NULL
),
    new_payment AS (
        INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, currency,
                              payee_bank, payee_account, decided_at, fingerprint)
        SELECT h.payment_id, h.event_id, h.v->>'method', h.v->>'decision',
               (h.v->>'amount_cents')::bigint, h.v->>'currency', h.v->>'payee_bank',
               h.v->>'payee_account', (h.v->>'decided_at')::timestamptz, h.fp
          FROM item h
         WHERE h.locked AND NOT h.known AND NOT h.paid
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
)
    SELECT h.idx,
           CASE WHEN NOT h.locked THEN 'in_flight'
                WHEN h.known AND h.k_fp = h.fp THEN 'replay'
                WHEN h.known THEN 'key_reused'
                WHEN h.paid AND h.p_same THEN 'replay'
                WHEN h.paid THEN 'key_reused'
                WHEN n.event_id IS NOT NULL THEN 'accepted'
                ELSE 'payment_decided' END,
           CASE WHEN h.known AND h.k_fp = h.fp THEN h.k_response
                WHEN h.known THEN NULL
                WHEN h.paid AND h.p_same THEN h.p_response
                WHEN n.event_id IS NOT NULL THEN h.response END
      FROM item h LEFT JOIN new_payment n ON n.event_id = h.event_id
     ORDER BY h.idx;
END
$$;
