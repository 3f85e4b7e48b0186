-- bench/batch_calls.sql - what one call of settle_batch() and of claim_outbox() costs, by batch
-- size, on one session (docs/performance.md, decision 38). Run it on a scratch database that
-- holds a history (bench/history.sql), never on one that serves payments: it settles payments
-- of its own (ids calls-*) and deletes them, and its claims lock the pending outbox rows for a
-- moment. Asynchronous commit: the figures are the calls' own time, not the disk's.
--   psql -v sizes='{1,4,9,32,128}' -v calls=2000 -f bench/batch_calls.sql URL
\set ON_ERROR_STOP on
SET synchronous_commit = off;
\pset pager off
SET client_min_messages = notice;

CREATE PROCEDURE pg_temp.time_settles(p_sizes integer[], p_calls integer)
LANGUAGE plpgsql AS $$
DECLARE
    j jsonb; t0 timestamptz; spent interval; n integer := 0; b integer;
BEGIN
    FOREACH b IN ARRAY p_sizes LOOP
        -- fresh published payments for every call: a settled one would be a duplicate
        INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, currency,
                              payee_bank, payee_account, decided_at, status, fingerprint)
        SELECT 'calls-' || i, 'calls-' || i, 'pix', 'approved', 1000, 'BRL', '001', i::text,
               now(), 'published', decode(md5('calls-' || i), 'hex')
          FROM generate_series(n, n + b * p_calls - 1) i;
        COMMIT;
        spent := '0';
        FOR k IN 0 .. p_calls - 1 LOOP
            SELECT jsonb_agg(jsonb_build_object('event_id', 'calls-' || i, 'payment_id',
                                                'calls-' || i, 'attempt', 1)
                             ORDER BY ('calls-' || i) COLLATE "C")
              INTO j FROM generate_series(n + k * b, n + (k + 1) * b - 1) i;
            t0 := clock_timestamp();
            PERFORM count(*) FROM settle_batch(j);
            spent := spent + (clock_timestamp() - t0);
            COMMIT;
        END LOOP;
        n := n + b * p_calls;
        RAISE NOTICE 'settle_batch() of %: % us a call, % us a payment', b,
            round((extract(epoch FROM spent) * 1e6 / p_calls)::numeric, 1),
            round((extract(epoch FROM spent) * 1e6 / p_calls / b)::numeric, 1);
    END LOOP;
    DELETE FROM ledger_entries WHERE event_id LIKE 'calls-%';
    DELETE FROM inbox WHERE event_id LIKE 'calls-%';
    DELETE FROM payments WHERE payment_id LIKE 'calls-%';
    COMMIT;
END $$;

CREATE PROCEDURE pg_temp.time_claims(p_calls integer)
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz; spent interval := '0'; c bigint;
BEGIN
    FOR k IN 1 .. p_calls LOOP
        t0 := clock_timestamp();
        SELECT count(*) INTO c FROM claim_outbox(256);
        spent := spent + (clock_timestamp() - t0);
        ROLLBACK; -- the claimed rows stay pending
    END LOOP;
    RAISE NOTICE 'claim_outbox(256) finding % rows: % us a call', c,
        round((extract(epoch FROM spent) * 1e6 / p_calls)::numeric, 1);
END $$;

CALL pg_temp.time_settles(:'sizes'::integer[], :calls);
CALL pg_temp.time_claims(:calls);
