/*
 * tests/integration/test_payment_pages.c - a payment's updates stay on its page
 *
 * The relay marks a batch of payments published in one statement, and at a few
 * thousand payments a second a batch holds most rows of the pages the accepts
 * just filled. None of the old versions can be pruned while that statement
 * runs, so each row's new version must find room on its own page, or the update
 * writes two entries into payments' 1 GB of indexes instead of none (a HOT
 * update, sql/0024). The payments are accepted by accept_payment() and marked by
 * the relay's own statement (shared/payment_status.h), with rows as large as
 * the load generator's; pg_stat_xact_user_tables counts the transaction's HOT
 * updates. With sql/0017's 30% of each page free, fewer than half were HOT.
 */
#include <stdio.h>
#include <stdlib.h>

#include "shared/payment_status.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

#define PAYMENTS "200" /* about a dozen pages */

static tdb *db;

static void test_batch_mark_stays_on_page(void)
{
    long long updated, hot;
    char *ids;

    CHECK(tdb_exec(db,
                   "SELECT count(*) FROM generate_series(1, " PAYMENTS ") g, "
                   "LATERAL accept_payment('bench-1796623514412-' || g, "
                   "'bench-1796623514412-' || g, 'pix', 'approved', 1500 + g, 'BRL', '341', "
                   "'0001-' || lpad(g::text, 6, '0'), now(), "
                   "sha256(g::text::bytea), "
                   "'{\"amount_cents\":1500,\"currency\":\"BRL\",\"method\":\"pix\"}', "
                   "'00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '{}')",
                   NULL));
    ids = tdb_value(db, "SELECT array_agg(id)::text FROM outbox", NULL);
    CHECK(ids != NULL);
    CHECK(tdb_exec(db, "BEGIN", NULL));
    CHECK(tdb_exec(db, PAYMENT_STATUS_SQL_PUBLISHED, ids ? ids : "{}", NULL));
    updated = tdb_long(
        db, "SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'payments'", NULL);
    hot = tdb_long(
        db, "SELECT n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'payments'", NULL);
    CHECK_INT(updated, 200);
    CHECK_INT(hot, updated);
    CHECK(tdb_exec(db, "ROLLBACK", NULL));
    free(ids);
}

static void run(void)
{
    test_batch_mark_stays_on_page();
}

int main(void)
{
    return tdb_main("test_payment_pages", true, &db, run);
}
