-- bench/accept_baseline.sql - pgbench script of the commit baseline (scripts/bench):
-- exactly the SQL of one accept in a one-transaction-per-request design: BEGIN, accept_payment()
-- (payment, outbox and idempotency rows, sql/0001) with the same body the load generator sends
-- (in the canonical form the API stores), COMMIT. Ids are unique: PREFIX-CLIENT-N, N a per-client
-- counter (pgbench keeps a client's variables from one transaction to the next).
-- Run: pgbench -n -M prepared -c C -j 2 -T S -D pfx=bench-x-c1- -D seq=0 -f bench/accept_baseline.sql URL
\set seq :seq + 1
BEGIN;
SELECT * FROM accept_payment(:pfx::text || :client_id || '-' || :seq, :pfx::text || :client_id || '-' || :seq, 'pix', 'approved', 1500, 'BRL', '001', '1234-5', '2026-11-29T12:00:00Z', '\x5f0d2c4e8a1b3c7d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f', '{"amount_cents":1500,"currency":"BRL","decided_at":"2026-11-29T12:00:00Z","decision":"approved","event_id":"' || :pfx::text || :client_id || '-' || :seq || '","method":"pix","payee":{"account":"1234-5","bank":"001"},"payer":{"document":"12345678909","name":"Maria Silva"},"payment_id":"' || :pfx::text || :client_id || '-' || :seq || '"}', NULL, '{"event_id":"' || :pfx::text || :client_id || '-' || :seq || '","payment_id":"' || :pfx::text || :client_id || '-' || :seq || '","status":"accepted"}');
COMMIT;
