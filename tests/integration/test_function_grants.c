/*
 * tests/integration/test_function_grants.c - only the role of a program may run its SQL functions
 *
 * PostgreSQL grants EXECUTE on a new function to PUBLIC, so a GRANT to one role (sql/0005,
 * 0006) restricts nothing until PUBLIC loses it (sql/0012). The functions run with the caller's
 * rights (SECURITY INVOKER), so the batch functions' callers also need the row functions they
 * call: paygw_api runs accept_batch() and accept_payment(), paygw_worker settle_batch() and
 * settle_payment(), and no other role runs any of them.
 *
 * reconciliation_horizon() (sql/0020) is SECURITY DEFINER, so that paygw_api sees the open
 * transactions of every role: only paygw_api runs it, and run by paygw_api it does see them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

#define ACCEPT_PAYMENT_ARGS                                                                        \
    "text, text, text, text, bigint, text, text, text, timestamptz, bytea, text, text, text"

static const char *const functions[] = {
    "accept_batch(jsonb)",
    "accept_payment(" ACCEPT_PAYMENT_ARGS ")",
    "settle_batch(jsonb)",
    "settle_payment(text, text, integer)",
    "rearm_lost_retries(integer, integer)",
    "claim_outbox(integer)",
    "purge_outbox(bigint, integer, integer)",
    "reconciliation_horizon()",
    "outbox_backlog(bigint)",
};

static tdb *db;
static char nobody[64]; /* a role of this test's own, with no grant */

/* Whether @role may run @function, according to has_function_privilege(). */
static bool may_execute(const char *role, const char *function)
{
    char *v = tdb_value(db, "SELECT has_function_privilege($1, $2, 'EXECUTE')::text", role,
                        function, NULL);
    bool yes = v != NULL && v[0] == 't';

    free(v);
    return yes;
}

static void test_who_may_execute(void)
{
    static const struct {
        const char *role;
        bool may[9]; /* functions[] in order */
    } want[] = {
        {"paygw_api", {true, true, false, false, false, false, false, true, true}},
        {"paygw_relay", {false, false, false, false, true, true, true, false, true}},
        {"paygw_worker", {false, false, true, true, false, false, false, false, false}},
        {nobody, {false, false, false, false, false, false, false, false, false}},
    };

    for (size_t r = 0; r < sizeof want / sizeof want[0]; r++)
        for (size_t f = 0; f < sizeof functions / sizeof functions[0]; f++) {
            tcheck_context("%s %s", want[r].role, functions[f]);
            CHECK_INT(may_execute(want[r].role, functions[f]), want[r].may[f]);
        }
    tcheck_context_clear();
}

/* The error of @sql run as @role on a connection of its own, as a new string; NULL if it ran. */
static char *error_as(const char *role, const char *sql)
{
    PGconn *pg = PQconnectdb(tdb_url(db));
    char set_role[96];
    char *err = NULL;

    if (PQstatus(pg) != CONNECTION_OK) {
        err = strdup(PQerrorMessage(pg));
        PQfinish(pg);
        return err;
    }
    snprintf(set_role, sizeof set_role, "SET ROLE %s", role);
    PQclear(PQexec(pg, set_role));
    PGresult *res = PQexec(pg, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
        err = strdup(PQresultErrorMessage(res));
    PQclear(res);
    PQfinish(pg);
    return err;
}

/* Not only the catalogue: a call as a role without the grant is refused for that reason. */
static void test_call_refused(void)
{
    static const struct {
        const char *role, *sql, *function;
    } calls[] = {
        {"paygw_relay", "SELECT * FROM accept_batch('[]'::jsonb)", "accept_batch"},
        {"paygw_relay", "SELECT * FROM settle_batch('[]'::jsonb)", "settle_batch"},
        {"paygw_worker", "SELECT * FROM accept_batch('[]'::jsonb)", "accept_batch"},
        {"paygw_api", "SELECT * FROM settle_batch('[]'::jsonb)", "settle_batch"},
        {"paygw_api", "SELECT * FROM settle_payment('e', 'p', 1)", "settle_payment"},
        {nobody, "SELECT * FROM accept_batch('[]'::jsonb)", "accept_batch"},
        {"paygw_worker", "SELECT reconciliation_horizon()", "reconciliation_horizon"},
    };
    char want[96];

    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        char *err = error_as(calls[i].role, calls[i].sql);

        tcheck_context("%s: %s", calls[i].role, calls[i].sql);
        snprintf(want, sizeof want, "permission denied for function %s", calls[i].function);
        CHECK_CONTAINS(err, want);
        free(err);
    }
    tcheck_context_clear();
    /* the owner's own calls still work (the tests and the bench run as the owner) */
    CHECK_INT(tdb_rows(db, "SELECT * FROM accept_batch('[]'::jsonb)", NULL), 0);
}

/* As paygw_api, the horizon stops at the start of a transaction another role holds open. */
static void test_horizon_sees_every_role(void)
{
    PGconn *holder = PQconnectdb(tdb_url(db)), *api = PQconnectdb(tdb_url(db));
    PGresult *res;
    char sql[256], started[64] = "";

    if (!CHECK(PQstatus(holder) == CONNECTION_OK && PQstatus(api) == CONNECTION_OK))
        goto out;
    PQclear(PQexec(holder, "BEGIN"));
    res = PQexec(holder, "SELECT now()::text");
    if (CHECK(PQresultStatus(res) == PGRES_TUPLES_OK))
        snprintf(started, sizeof started, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    PQclear(PQexec(api, "SET ROLE paygw_api"));
    usleep(100 * 1000);
    snprintf(sql, sizeof sql, "SELECT (reconciliation_horizon() <= '%s'::timestamptz)::text",
             started);
    res = PQexec(api, sql);
    tcheck_context("%s: %s", sql, PQresultErrorMessage(res));
    CHECK(PQresultStatus(res) == PGRES_TUPLES_OK && strcmp(PQgetvalue(res, 0, 0), "true") == 0);
    tcheck_context_clear();
    PQclear(res);
out:
    PQfinish(holder);
    PQfinish(api);
}

static void run(void)
{
    char sql[128];

    /* roles are cluster-wide: a name of this process's own, dropped at the end */
    snprintf(nobody, sizeof nobody, "t_nogrant_%d", (int)getpid());
    snprintf(sql, sizeof sql, "CREATE ROLE %s NOLOGIN", nobody);
    if (CHECK(tdb_exec(db, sql, NULL))) {
        TRUN(test_who_may_execute);
        TRUN(test_call_refused);
        TRUN(test_horizon_sees_every_role);
        snprintf(sql, sizeof sql, "DROP ROLE %s", nobody);
        CHECK(tdb_exec(db, sql, NULL));
    }
}

int main(void)
{
    return tdb_main("test_function_grants", true, &db, run);
}
