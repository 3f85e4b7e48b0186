-- 0020: reconciliation reads what changed since its last clean report (issue 17: a database
-- that has lived).
--
-- GET /admin/reconciliation grouped the whole ledger by event and joined it, the inbox and the
-- payments: 19 s on 2,333,454 payments, past the API's statement timeout, so the report answered
-- 503. Now its three ledger checks read the events written since a checkpoint (payments updated,
-- ledger lines created, inbox rows processed since then) and judge each of those events whole;
-- a clean report moves the checkpoint (api/admin/reconcile.c). `?full=true` still reads all.

-- The ledger is append-only and its lines arrive in time order: a BRIN index finds the lines of
-- the last minutes for a few pages of index and costs an insert almost nothing (a btree would add
-- an index entry per line).
CREATE INDEX ledger_entries_created_at ON ledger_entries USING brin (created_at);

-- One row: every event whose rows were all written before verified_before passed the ledger
-- checks of a report. '-infinity': no report yet, the next one reads everything.
CREATE TABLE reconciliation_checkpoint (
    single          boolean PRIMARY KEY DEFAULT true CHECK (single),
    verified_before timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO reconciliation_checkpoint (verified_before) VALUES ('-infinity');

-- The time before which no row can still appear. Every writer stamps its rows with now(), its
-- transaction's start; a transaction that has not committed yet started at or after the oldest
-- xact_start in pg_stat_activity. Called before the report's snapshot is taken, it gives a time
-- such that every row stamped earlier is already visible to that snapshot. SECURITY DEFINER:
-- the API's role may not read other roles' sessions, and this returns only a time.
CREATE FUNCTION reconciliation_horizon() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT least(now(), min(xact_start))
      FROM pg_stat_activity
     WHERE datname = current_database() AND backend_type = 'client backend'
       AND pid <> pg_backend_pid()
$$;

REVOKE EXECUTE ON FUNCTION reconciliation_horizon() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION reconciliation_horizon() TO paygw_api;
GRANT SELECT, UPDATE ON reconciliation_checkpoint TO paygw_api;
