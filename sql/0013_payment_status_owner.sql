-- 0013: one owner of a payment's status. Every UPDATE that changes payments.status
-- (the relay's marks, the worker's marks, settle_payment/settle_batch, the admin
-- replay) has payment_may_move(status, '<new>') in its WHERE clause. A move the
-- table does not list matches no row: the writer's statement does nothing and
-- succeeds, so no program retries it. The accept only INSERTs 'accepted' (no move).
--
-- The table is docs/architecture.md, "Status": accepted -> published|unroutable -> retrying ->
-- settled|dead_lettered. A status may skip ahead (the worker can settle, retry or
-- dead-letter a payment whose 'published' mark the relay has not committed yet),
-- never go back, and never move sideways (published <-> unroutable, settled <->
-- dead_lettered). Same-status moves: retrying -> retrying (each retry records its
-- attempt and error) and dead_lettered -> dead_lettered. The second is what lets the
-- worker's dead_lettered mark wait for a replay in flight: the replay holds the row
-- from its dead_lettered -> published UPDATE to its COMMIT, and an UPDATE whose WHERE
-- is false on the committed row never waits for that lock. Matching dead_lettered, the
-- mark waits, and READ COMMITTED re-checks it on the replay's 'published' row, so a
-- replayed message that dies again leaves the payment dead_lettered, not published.
-- A settled payment keeps its one settle. The one backward step, dead_lettered ->
-- published, belongs to the admin replay alone (p_replay): for any other writer it
-- is a late write that must not undo the dead letter.
--
-- LANGUAGE sql, IMMUTABLE, a single expression with no FROM: the planner inlines it
-- into the caller's WHERE clause, so the relay's and settle_batch's set-based UPDATEs
-- pay a few comparisons per row, not a function call.
CREATE FUNCTION payment_may_move(p_from text, p_to text, p_replay boolean DEFAULT false)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_replay
                THEN (p_from, p_to) = ('dead_lettered', 'published')
                ELSE (p_from, p_to) IN (('accepted',   'published'),
                                        ('accepted',   'unroutable'),
                                        ('accepted',   'retrying'),
                                        ('accepted',   'settled'),
                                        ('accepted',   'dead_lettered'),
                                        ('published',  'retrying'),
                                        ('published',  'settled'),
                                        ('published',  'dead_lettered'),
                                        ('unroutable', 'retrying'),
                                        ('unroutable', 'settled'),
                                        ('unroutable', 'dead_lettered'),
                                        ('retrying',   'retrying'),
                                        ('retrying',   'settled'),
                                        ('retrying',   'dead_lettered'),
                                        ('dead_lettered', 'dead_lettered'))
           END
$$;

COMMENT ON FUNCTION payment_may_move(text, text, boolean) IS
    'The one owner of payments.status: true when a writer may move a payment from p_from to '
    'p_to (p_replay: the admin replay''s dead_lettered -> published). sql/0013.';

-- payment_status_rank() (sql/0001) guarded the worker's retrying mark; nothing uses it now.
COMMENT ON FUNCTION payment_status_rank(text) IS
    'Unused since sql/0013: payment_may_move() decides every status move.';

-- settle_payment (sql/0007) with the owner's guard: a payment that may not become
-- 'settled' gets no inbox row, no ledger lines and no status write. Outcomes are
-- unchanged: 'terminal' for a dead-lettered payment, 'duplicate' for one already
-- settled (before, the inbox's ON CONFLICT said so; now the status does, first).
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
    IF NOT payment_may_move(p.status, 'settled') THEN
        RETURN QUERY SELECT CASE WHEN p.status = 'dead_lettered' THEN 'terminal'
                                 ELSE 'duplicate' END, NULL::double precision;
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
     WHERE payment_id = p_payment_id AND payment_may_move(status, 'settled');

    RETURN QUERY SELECT 'settled'::text, extract(epoch FROM now() - p.created_at)::double precision;
END
$$;

-- settle_batch (sql/0009) with the same guard, still set-based: the inbox rows (and
-- so the ledger lines) are written only for locked payments that may move to
-- 'settled', and the status UPDATE carries the guard itself.
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
           settled_at = now(), updated_at = now()
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
