/*
 * tests/integration/test_db_batch_commit.c - BEGIN, a batch and its COMMIT in one round trip
 *
 * db_batch_commit() carries the worker's settle batch (worker/settle/inbox.c) in one
 * round trip instead of two. What the caller must still be told apart: a batch
 * that committed (its rows), one that committed nothing (the function failed:
 * the batch may be split and run again), and one whose outcome is unknown (the
 * COMMIT failed, or the session broke after the BEGIN, or the answer does not
 * fit: never run again as if nothing had happened). The connection stays usable
 * after each, and a session that died while idle is reconnected once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/pg/db.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

static const db_stmt stmts[] = {
    /* a row per item, as accept_batch() and settle_batch() answer */
    {"put", "INSERT INTO t (k) SELECT (e #>> '{}')::int FROM jsonb_array_elements($1::jsonb) e "
            "RETURNING k"},
    /* one row more than items */
    {"extra", "WITH i AS (INSERT INTO t (k) SELECT (e #>> '{}')::int "
              "FROM jsonb_array_elements($1::jsonb) e RETURNING k) "
              "SELECT k FROM i UNION ALL SELECT -1"},
    /* a deferred foreign key: the statement succeeds, its COMMIT fails */
    {"late", "INSERT INTO d (k) SELECT (e #>> '{}')::int FROM jsonb_array_elements($1::jsonb) e "
             "RETURNING k"},
    /* runs, then ends its own session: the sequence counts how often it ran */
    {"cut", "SELECT nextval('ran'), pg_terminate_backend(pg_backend_pid()) "
            "FROM jsonb_array_elements($1::jsonb)"},
};

static tdb *t;

static gw_err batch(db_conn *db, const char *name, const char *json, int n, bool *at_commit)
{
    PGresult *res = NULL;
    gw_err err;

    *at_commit = false;
    err = db_batch_commit(db, name, json, n, &res, at_commit);
    CHECK((err == GW_OK) == (res != NULL));
    if (res != NULL)
        CHECK_INT(PQntuples(res), n);
    PQclear(res);
    return err;
}

static long long rows_in(const char *table)
{
    char sql[64];

    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    return tdb_long(t, sql, NULL);
}

static void run(void)
{
    db_conn *db = NULL;
    bool at_commit;

    if (!CHECK(tdb_exec(t, "CREATE TABLE t (k int PRIMARY KEY)", NULL)) ||
        !CHECK(tdb_exec(t, "CREATE TABLE p (k int PRIMARY KEY)", NULL)) ||
        !CHECK(tdb_exec(t, "CREATE TABLE d (k int REFERENCES p (k) DEFERRABLE INITIALLY DEFERRED)",
                        NULL)) ||
        !CHECK(tdb_exec(t, "CREATE SEQUENCE ran", NULL)) ||
        !CHECK(db_open(tdb_url(t), "test_db_batch_commit", stmts, 4, false, &db) == GW_OK))
        goto out;

    /* committed when it returns, seen by another session at once, nothing left open */
    CHECK(batch(db, "put", "[1, 2, 3]", 3, &at_commit) == GW_OK);
    CHECK(at_commit);
    CHECK_INT(rows_in("t"), 3);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);

    /* the function failed: nothing committed, rolled back, and the caller may run it again
     * (the batches split into single items after this) */
    CHECK(batch(db, "put", "[4, 1]", 2, &at_commit) == GW_ERR_CONFLICT);
    CHECK(!at_commit);
    CHECK_INT(rows_in("t"), 3);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);
    CHECK(batch(db, "put", "[4]", 1, &at_commit) == GW_OK);
    CHECK_INT(rows_in("t"), 4);

    /* the COMMIT failed: an unknown outcome to the caller (here: nothing committed) */
    CHECK(batch(db, "late", "[7]", 1, &at_commit) != GW_OK);
    CHECK(at_commit);
    CHECK_INT(rows_in("d"), 0);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);

    /* committed, but the answer does not fit the batch: a failure, and never "nothing ran" */
    CHECK(batch(db, "extra", "[5]", 1, &at_commit) == GW_ERR_DB);
    CHECK(at_commit);
    CHECK_INT(tdb_long(t, "SELECT count(*) FROM t WHERE k = 5", NULL), 1);

    /* a session that died while idle: reconnected once, the statements prepared again */
    CHECK(tdb_exec(t,
                   "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                   "WHERE application_name = 'test_db_batch_commit'",
                   NULL));
    CHECK(batch(db, "put", "[6]", 1, &at_commit) == GW_OK);
    CHECK_INT(rows_in("t"), 6);

    /* a batch that ran and then lost its session: unknown, and run once only */
    CHECK(batch(db, "cut", "[0]", 1, &at_commit) != GW_OK);
    CHECK(at_commit);
    CHECK_INT(tdb_long(t, "SELECT last_value FROM ran", NULL), 1);
    CHECK(batch(db, "put", "[8]", 1, &at_commit) == GW_OK);
    CHECK_INT(rows_in("t"), 7);
out:
    db_close(db);
}

int main(void)
{
    return tdb_main("test_db_batch_commit", false, &t, run);
}
