-- bench/settle_baseline.sql - pgbench script of the settle baseline (scripts/bench):
-- one settlement per transaction, exactly what a one-delivery-at-a-time worker commits:
-- BEGIN, settle_payment() (inbox row, two ledger lines, payment settled; sql/0002), COMMIT.
-- The payments exist beforehand as 'published' (scripts/bench inserts PREFIX-CLIENT-1..K for
-- every client); N is a per-client counter, so every transaction settles a different payment.
-- Run: pgbench -n -M prepared -c C -j 2 -T S -D pfx=bench-x-s1- -D seq=0 -f bench/settle_baseline.sql URL
\set seq :seq + 1
BEGIN;
SELECT * FROM settle_payment(:pfx::text || :client_id || '-' || :seq, :pfx::text || :client_id || '-' || :seq, 1);
COMMIT;
