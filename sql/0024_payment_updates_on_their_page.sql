-- 0024: the payment row keeps its two updates on its page at the rate the benchmark runs now,
-- and settle_batch()'s settle names the status owner again (issue 17).
--
-- sql/0017 left 30% of each new payments page free, so that the relay's mark (published) and
-- the worker's settle write their new versions on the row's own page without new index
-- entries (HOT). That held at 1,500 payments/s (94-99% HOT); at 2,329/s on a 4-million-payment
-- database 66-78% of the updates were HOT, in interleaved 30 s runs. The rest wrote two entries
-- each into payments_pkey and payments_event_id_key (1 GB together), which the autovacuum of
-- payments then reads through from end to end (21 s, "index scans: 1"). With half of each new
-- page free, 84-95% were HOT in the same runs. Only pages written from now on are filled this
-- way; a 217-byte row takes about 16 to a page instead of 23.
ALTER TABLE payments SET (fillfactor = 50);

-- sql/0013's rule is that every UPDATE of payments.status names payment_may_move() in its own
-- WHERE clause. sql/0023's settle reached only rows the inbox insert had let through, which
-- asked payment_may_move(), so nothing changes in what it writes; the settle now says so
-- itself, as settle_payment() does. The rest of the function is sql/0023's.
CREATE OR REPLACE FUNCTION settle_batch(p_items jsonb)
RETURNS TABLE (idx integer, outcome text, seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
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

    RETURN QUERY
    WITH item AS MATERIALIZED (
        SELECT (a.o - 1)::integer AS idx, a.v->>'event_id' AS event_id,
               a.v->>'payment_id' AS payment_id, (a.v->>'attempt')::integer AS attempt,
               a.v->>'bank_reference' AS bank_reference
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS a(v, o)
    ),
    locked AS MATERIALIZED ( -- in payment_id order, as every writer of payments locks
        SELECT i.idx, i.attempt, i.bank_reference, p.event_id, p.payment_id,
               p.status, p.method, p.payee_bank, p.payee_account, p.amount_cents, p.created_at
          FROM item i
          JOIN payments p ON p.event_id = i.event_id AND p.payment_id = i.payment_id
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
    ),
    new_ids AS ( -- one array: the parts below test membership in it, not join on new_inbox
        SELECT ARRAY(SELECT n.event_id FROM new_inbox n) AS ids
    ),
    new_ledger AS (
        INSERT INTO ledger_entries (event_id, payment_id, account, side, amount_cents)
        SELECT l.event_id, l.payment_id, e.account, e.side, l.amount_cents
          FROM locked l
         CROSS JOIN new_ids
         CROSS JOIN LATERAL (VALUES (1, 'clearing:' || l.method, 'debit'),
                                    (2, 'payee:' || l.payee_bank || '/' || l.payee_account,
                                     'credit')) AS e(nth, account, side)
         WHERE l.event_id = ANY (new_ids.ids)
         ORDER BY l.idx, e.nth
    ),
    settled AS (
        UPDATE payments p
           SET status = 'settled', attempts = l.attempt, last_error = NULL,
               settled_at = now(), updated_at = now(), bank_reference = l.bank_reference
          FROM locked l, new_ids
         WHERE p.event_id = l.event_id AND l.event_id = ANY (new_ids.ids)
           AND payment_may_move(l.status, 'settled')
    )
    SELECT i.idx,
           CASE WHEN l.event_id IS NULL THEN 'unknown_payment'
                WHEN l.event_id = ANY (new_ids.ids) THEN 'settled'
                WHEN l.status = 'dead_lettered' THEN 'terminal'
                ELSE 'duplicate' END,
           CASE WHEN l.event_id = ANY (new_ids.ids)
                THEN extract(epoch FROM now() - l.created_at)::double precision END
      FROM item i
      LEFT JOIN locked l ON l.idx = i.idx
     CROSS JOIN new_ids
     ORDER BY i.idx;
END
$$;

COMMENT ON FUNCTION settle_batch(jsonb) IS
    'Settles a batch of deliveries in one statement: locks their payments in payment_id order, '
    'writes the inbox rows, the ledger lines and the settle of those the status owner lets '
    'move, and answers one row per item (settled, duplicate, terminal, unknown_payment). '
    'sql/0009, one statement since sql/0023, the settle guarded by payment_may_move() again '
    'since sql/0024.';
