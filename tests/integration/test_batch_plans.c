/*
 * tests/integration/test_batch_plans.c - the relay's claim and the worker's settle keep their
 * plans between calls
 *
 * At a moderate rate a batch holds a few payments, and planning the statements of
 * claim_outbox() and settle_batch() again at every call cost more than running them
 * (sql/0023: a claim of 5 rows 159-176 -> 48-54 us, a settle of one payment 590 -> 240 us).
 * pg_stat_statements counts how often each statement inside them is planned: over 20 calls of
 * small batches, none may be planned more than the plan cache's five custom plans and its one
 * generic plan.
 */
#include <stdio.h>

#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

#define CALLS     20
#define MAX_PLANS 6 /* the plan cache tries five custom plans, then keeps a generic one */

static tdb *db;

/* The most plans of one statement run inside a function (not at top level) since the reset. */
static long long most_plans(const char *like)
{
    return tdb_long(db,
                    "SELECT coalesce(max(plans), 0) FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND NOT toplevel AND query LIKE $1",
                    like, NULL);
}

static bool start_counting(void)
{
    return tdb_exec(db, "SET pg_stat_statements.track = 'all'", NULL) &&
           tdb_exec(db, "SET pg_stat_statements.track_planning = on", NULL) &&
           tdb_exec(db,
                    "SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database "
                    "WHERE datname = current_database()), 0)",
                    NULL);
}

static void test_settle_plans_kept(void)
{
    char from[16];
    long long plans;

    CHECK(tdb_exec(db,
                   "SELECT count(*) FROM generate_series(1, 20) g, " /* CALLS */
                   "LATERAL accept_payment('plan-ev-' || g, 'plan-pay-' || g, 'pix', "
                   "'approved', 100 + g, 'BRL', '001', '0000-' || g, now(), '\\xaa'::bytea, "
                   "'{}', NULL, '{}')",
                   NULL));
    CHECK(start_counting());
    for (int i = 0; i < CALLS; i++) { /* one payment a batch: the smallest is the worst */
        snprintf(from, sizeof from, "%d", i + 1);
        CHECK(tdb_exec(db,
                       "SELECT count(*) FROM settle_batch((SELECT jsonb_agg(jsonb_build_object("
                       "'event_id', 'plan-ev-' || g, 'payment_id', 'plan-pay-' || g, "
                       "'attempt', 1) ORDER BY ('plan-pay-' || g) COLLATE \"C\") "
                       "FROM generate_series($1::int, $1::int) g))",
                       from, NULL));
    }
    CHECK_SQL_STR(db, "SELECT count(*) FROM payments WHERE status = 'settled'", "20");
    plans = most_plans("%payments%");
    CHECK(plans > 0); /* the counting works: something inside settle_batch() was planned */
    CHECK(plans <= MAX_PLANS);
    if (plans > MAX_PLANS)
        printf("# a statement of settle_batch() was planned %lld times in %d calls\n", plans,
               CALLS);
}

static void test_claim_plans_kept(void)
{
    long long plans;

    CHECK(start_counting());
    for (int i = 0; i < CALLS; i++) /* the rows stay pending: a claim only locks them */
        CHECK(tdb_exec(db, "SELECT count(*) FROM claim_outbox(5)", NULL));
    plans = most_plans("%outbox_pending%");
    CHECK(plans > 0);
    CHECK(plans <= MAX_PLANS);
    if (plans > MAX_PLANS)
        printf("# claim_outbox()'s query was planned %lld times in %d calls\n", plans, CALLS);
}

static void run(void)
{
    if (!tdb_exec(db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", NULL)) {
        FAIL("pg_stat_statements is needed (shared_preload_libraries, as scripts/stack sets it)");
        return;
    }
    TRUN(test_settle_plans_kept);
    TRUN(test_claim_plans_kept);
}

int main(void)
{
    return tdb_main("test_batch_plans", true, &db, run);
}
