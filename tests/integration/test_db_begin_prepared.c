/*
 * tests/integration/test_db_begin_prepared.c - BEGIN and a statement in one round trip
 *
 * db_begin_prepared() sends BEGIN and the batch statement together in libpq's
 * pipeline mode (the relay's claim). What it must keep of the two round trips
 * it replaces: the statement runs inside a
 * transaction that only db_commit() commits (a statement sent alone commits at
 * its Sync), a failed statement leaves a transaction db_rollback() ends on a
 * connection that stays usable, and a session that died while idle is
 * reconnected once. A statement that ran and then lost its session is not run
 * a second time: its effects outside the transaction (a sequence, a wait) would be.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/pg/db.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

static const db_stmt stmts[] = {
    {"put", "INSERT INTO t (k) VALUES ($1::int) RETURNING k"},
    /* runs, then ends its own session: the sequence counts how often it ran */
    {"cut", "SELECT nextval('ran'), pg_terminate_backend(pg_backend_pid())"},
};

static tdb *t;

static gw_err put(db_conn *db, const char *k)
{
    const char *params[1] = {k};
    PGresult *res = db_begin_prepared(db, "put", 1, params);
    gw_err err = db_check(res, PGRES_TUPLES_OK, "put");

    PQclear(res);
    return err;
}

static long long rows_with(const char *k)
{
    return tdb_long(t, "SELECT count(*) FROM t WHERE k = $1::int", k, NULL);
}

static void run(void)
{
    db_conn *db = NULL;
    PGresult *res;

    if (!CHECK(tdb_exec(t, "CREATE TABLE t (k int PRIMARY KEY)", NULL)) ||
        !CHECK(tdb_exec(t, "CREATE SEQUENCE ran", NULL)) ||
        !CHECK(db_open(tdb_url(t), "test_db_begin_prepared", stmts, 2, false, &db) == GW_OK))
        goto out;

    /* the statement's effect waits for the COMMIT */
    if (CHECK(put(db, "1") == GW_OK)) {
        CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_INTRANS);
        CHECK_INT(rows_with("1"), 0);
        CHECK(db_commit(db) == GW_OK);
    }
    CHECK_INT(rows_with("1"), 1);

    /* and a rollback undoes it: without the BEGIN, the insert would have committed alone */
    if (CHECK(put(db, "2") == GW_OK))
        db_rollback(db);
    CHECK_INT(rows_with("2"), 0);

    /* a failed statement: its error, a transaction to roll back, the connection kept */
    CHECK(put(db, "1") == GW_ERR_CONFLICT);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_INERROR);
    db_rollback(db);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);
    if (CHECK(put(db, "3") == GW_OK))
        CHECK(db_commit(db) == GW_OK);
    CHECK_INT(rows_with("3"), 1);

    /* a session that died while idle: reconnected once, the statements prepared again */
    CHECK(tdb_exec(t,
                   "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                   "WHERE application_name = 'test_db_begin_prepared'",
                   NULL));
    if (CHECK(put(db, "4") == GW_OK))
        CHECK(db_commit(db) == GW_OK);
    CHECK_INT(rows_with("4"), 1);

    /* a statement that ran and then lost its session: an error, and it ran once; the next
     * call finds the dead session by its BEGIN and reconnects */
    res = db_begin_prepared(db, "cut", 0, NULL);
    CHECK(db_check(res, PGRES_TUPLES_OK, "cut") != GW_OK);
    PQclear(res);
    CHECK_INT(tdb_long(t, "SELECT last_value FROM ran", NULL), 1);
    if (CHECK(put(db, "5") == GW_OK))
        CHECK(db_commit(db) == GW_OK);
    CHECK_INT(rows_with("5"), 1);

    /* db_rollback() with no transaction open (a BEGIN that failed) says nothing to the server */
    db_rollback(db);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);
out:
    db_close(db);
}

int main(void)
{
    return tdb_main("test_db_begin_prepared", false, &t, run);
}
