-- bench/history.sql - a database that has lived (scripts/bench --history N): :n settled
-- payments spread over the last 30 days, with their rows as the retention rules leave them:
-- every payment (with its fingerprint: the payment row is the idempotency record, sql/0018),
-- its inbox row (INBOX_RETENTION_DAYS 30) and its two ledger lines; the outbox rows of the last
-- 24 hours (OUTBOX_RETENTION_HOURS). Set-based: one INSERT ... SELECT per table. Ids start with hist-.
--   psql -v n=N -f bench/history.sql
\set ON_ERROR_STOP on
BEGIN;
CREATE TEMP TABLE h ON COMMIT DROP AS
SELECT 'hist-' || i AS id,
       (ARRAY['pix', 'ted', 'card'])[1 + i % 3] AS method,
       (1000 + (i::bigint * 7919) % 500000) AS amount, -- bigint: 7919 * 2,000,000 > 2^31
       lpad((100 + i % 900)::text, 3, '0') AS bank,
       ((i * 31) % 100000)::text || '-' || (i % 10) AS account,
       now() - interval '30 days' * (1 - i::float8 / :n) AS at
  FROM generate_series(1, :n) AS i;

INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, currency, payee_bank,
                      payee_account, decided_at, status, attempts, created_at, updated_at,
                      settled_at, fingerprint)
SELECT id, id, method, 'approved', amount, 'BRL', bank, account, at, 'settled', 1, at,
       at + interval '20 ms', at + interval '20 ms', decode(md5(id), 'hex')
  FROM h ORDER BY at;

INSERT INTO ledger_entries (event_id, payment_id, account, side, amount_cents, created_at)
SELECT h.id, h.id, e.account, e.side, h.amount, h.at + interval '20 ms'
  FROM h CROSS JOIN LATERAL (VALUES (1, 'clearing:' || h.method, 'debit'),
                                    (2, 'payee:' || h.bank || '/' || h.account, 'credit'))
                            AS e(nth, account, side)
 ORDER BY h.at, e.nth;

INSERT INTO inbox (event_id, payment_id, attempt, processed_at)
SELECT id, id, 1, at + interval '20 ms' FROM h ORDER BY at;

INSERT INTO outbox (event_id, payment_id, routing_key, body, state, publish_attempts,
                    next_attempt_at, created_at, published_at)
SELECT id, id, 'payment.' || method || '.approved',
       json_build_object('event_id', id, 'payment_id', id, 'method', method)::text,
       'published', 1, at, at, at + interval '5 ms'
  FROM h WHERE at > now() - interval '24 hours' ORDER BY at;

CREATE SCHEMA IF NOT EXISTS bench;
CREATE TABLE IF NOT EXISTS bench.history (payments bigint, schema_version integer,
                                          built_at timestamptz);
DELETE FROM bench.history;
-- rows stamped in the past appeared: the next reconciliation reads every event (sql/0020)
UPDATE reconciliation_checkpoint SET verified_before = '-infinity';
INSERT INTO bench.history SELECT :n, max(version), now() FROM schema_migrations;
COMMIT;
