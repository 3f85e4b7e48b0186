/*
 * tests/integration/test_db_session.c - every program session is bounded
 *
 * db_open() is the one way the programs connect. Its sessions must carry the
 * statement timeout and the idle-in-transaction timeout, so a transaction left
 * open across a broker wait cannot hold its row locks for longer than the
 * bound (docs/decisions.md 14).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/pg/db.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

static void show(db_conn *db, const char *setting, const char *want)
{
    char sql[128];
    PGresult *res;

    snprintf(sql, sizeof sql, "SHOW %s", setting);
    res = PQexec(db_pg(db), sql);
    if (CHECK(PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1))
        CHECK_STR(PQgetvalue(res, 0, 0), want);
    PQclear(res);
}

static tdb *t;

static void run(void)
{
    db_conn *db = NULL;

    if (CHECK(db_open(tdb_url(t), "test_db_session", NULL, 0, false, &db) == GW_OK)) {
        show(db, "statement_timeout", "5s");
        show(db, "idle_in_transaction_session_timeout", "1min");
        /* and again after a reconnect: the settings belong to the session */
        CHECK(tdb_exec(t,
                       "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE application_name = 'test_db_session'",
                       NULL));
        PQclear(PQexec(db_pg(db), "SELECT 1")); /* fails: libpq notices the session is gone */
        if (CHECK(db_ensure(db) == GW_OK)) {
            show(db, "statement_timeout", "5s");
            show(db, "idle_in_transaction_session_timeout", "1min");
        }
    }
    db_close(db);
}

int main(void)
{
    return tdb_main("test_db_session", false, &t, run);
}
