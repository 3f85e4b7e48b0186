-- 0004: one database role per program, each with only what it needs.
-- The API cannot write the ledger or the inbox; the relay only moves outbox rows
-- and payment statuses; the worker cannot write the outbox. Roles are cluster-wide:
-- created once, granted per database. They have no password: give them one (or
-- use certificates) outside a loopback development cluster.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'paygw_api') THEN
        CREATE ROLE paygw_api LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'paygw_relay') THEN
        CREATE ROLE paygw_relay LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'paygw_worker') THEN
        CREATE ROLE paygw_worker LOGIN;
    END IF;
END
$$;

GRANT SELECT ON schema_migrations TO paygw_api, paygw_relay, paygw_worker;

-- payments-api: accept, read, admin (dead letters, replay's status move, reconciliation reads)
GRANT SELECT, INSERT ON payments, outbox, idempotency_keys TO paygw_api;
GRANT UPDATE (status, updated_at) ON payments TO paygw_api;
GRANT USAGE ON SEQUENCE outbox_id_seq TO paygw_api;
GRANT SELECT, INSERT, UPDATE ON dead_letters TO paygw_api;
GRANT USAGE ON SEQUENCE dead_letters_id_seq TO paygw_api;
GRANT SELECT ON ledger_entries, inbox TO paygw_api;
GRANT DELETE ON idempotency_keys TO paygw_api; -- expiry of records older than 7 days

-- payments-relay: claim, mark and purge outbox rows; move a payment to published/unroutable
GRANT SELECT, UPDATE, DELETE ON outbox TO paygw_relay;
GRANT SELECT ON payments TO paygw_relay;
GRANT UPDATE (status, last_error, updated_at) ON payments TO paygw_relay;

-- payments-worker: inbox and ledger in one transaction; payment status
GRANT SELECT, INSERT, DELETE ON inbox TO paygw_worker;
GRANT SELECT, INSERT ON ledger_entries TO paygw_worker;
GRANT USAGE ON SEQUENCE ledger_entries_id_seq TO paygw_worker;
GRANT SELECT ON payments TO paygw_worker;
GRANT UPDATE (status, attempts, last_error, updated_at, settled_at) ON payments TO paygw_worker;
