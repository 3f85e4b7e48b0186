-- 0023: the relay's claim and the worker's settle keep their plans between calls (issue 17:
-- less PostgreSQL work per batch at a moderate rate, where batches hold a few payments).
--
-- pg_stat_statements at 1,500 payments/s on the benchmark's history: batches of 4-5, and per
-- payment settle_batch() took 207 us, claim_outbox() 100 us. Both were planned again at every
-- call. claim_outbox() was LANGUAGE sql: PostgreSQL 15 plans a SQL function's body at each call
-- of the statement that calls it, and nothing kept it. sql/0015's settle_batch() had four
-- statements over the batch, two of them reading the array of the events it had just settled:
-- with a custom plan knowing that array's few elements cheaper than the generic one, the plan
-- cache planned them again at every call below about nine items. On one session (asynchronous
-- commit, 2,000 calls): a claim of 5 rows 170 -> 57-83 us; a settle of one payment 590 -> 240
-- us, of four 750 -> 350 us a call; from nine items on, both versions cost the same.
--
-- claim_outbox() is now PL/pgSQL: its one query is planned once per session and kept (the
-- plan is the one sql/0019 describes, which enable_seqscan and enable_sort keep whatever the
-- statistics say). Its plan is the generic one by order: a custom plan knows the LIMIT, always
-- looks cheaper, and would be made again at every call. settle_batch() is one statement whose only parameter is the items: its
-- generic plan is the custom one, so the cache keeps it. It also reads each payment fewer times:
-- the items are expanded once, each payment is found and locked once, and what the later parts
-- need (its amount, accounts, status and created_at) comes from that lock; the answer comes from
-- the lock and the inbox insert.
--
-- The parts of one statement see one snapshot: the ledger lines and the settle follow the inbox
-- insert through its RETURNING, never by reading inbox, and test membership in one array of its
-- event ids (the planner estimates the lock's result at one row and would join two CTEs of 128
-- rows by a nested loop: 16,000 comparisons of whole tuples, three times). The settle updates
-- rows the same statement locked (a lock by the updating transaction is no conflict) and finds
-- each by event_id, not by the ctid the lock saw: when the relay's mark committed between this
-- statement's snapshot and the lock, the lock returns the mark's version, which the snapshot
-- cannot see; the index scan finds the version it can see and follows it to the locked one
-- (READ COMMITTED's recheck; tests/integration/test_batch_functions.c,
-- test_settle_behind_a_concurrent_mark). A batch that holds an event twice goes row by row, as
-- before; the results, the rows written and their order (inbox in item order, ledger lines in
-- item order, debit before credit) are those of sql/0015, which test_batch_functions.c checks
-- against settle_payment() row by row.
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

CREATE OR REPLACE FUNCTION claim_outbox(p_limit integer)
RETURNS TABLE (id bigint, event_id text, payment_id text, routing_key text, body text,
               traceparent text, attempt integer)
LANGUAGE plpgsql SET enable_seqscan = off SET enable_sort = off
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY
    SELECT o.id, o.event_id, o.payment_id, o.routing_key, o.body, o.traceparent, o.attempt
      FROM outbox_pending p
     CROSS JOIN LATERAL (
        SELECT o.id, o.event_id, o.payment_id, o.routing_key, o.body, o.traceparent, o.attempt
          FROM outbox o
         WHERE o.id = p.id AND o.state = 'pending' AND o.next_attempt_at <= now()
           FOR UPDATE SKIP LOCKED) o
     ORDER BY p.id
     LIMIT p_limit;
END
$$;

COMMENT ON FUNCTION claim_outbox(integer) IS
    'Locks and returns up to p_limit pending outbox rows due now, oldest first, skipping rows '
    'locked by another transaction. Called by payments-relay at the start of a batch. sql/0019, '
    'PL/pgSQL since sql/0023 (its plan is kept between calls).';
