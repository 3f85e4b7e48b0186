/*
 * tests/e2e/test_worker_precheck.c - the built-in bank is asked before the inbox
 *
 * The inbox pre-check exists so that an HTTP bank is not called again for an
 * effect already committed. The built-in bank costs nothing to ask, so
 * payments-worker asks it first and runs the pre-check only for a batch with an
 * answer other than "executed" (docs/decisions.md, 43): one round trip per batch
 * instead of two, and the same outcome for every delivery.
 *
 * - A payment settled, then a second copy of its event: one settle, one
 *   duplicate, and no pre-check statement run against this database
 *   (pg_stat_statements).
 * - A payment on a fail-first=2 account settled by its attempt-3 copy, then a
 *   late copy of attempt 1: the bank says "transient" for attempt 1, the
 *   pre-check finds the inbox row, and the copy is acked as a duplicate, not
 *   sent to a delay queue.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define PLAIN_EVENT   "evt-pre-1"
#define PLAIN_PAYMENT "pay-pre-1"
#define LATE_EVENT    "evt-pre-2"
#define LATE_PAYMENT  "pay-pre-2"
#define LATE_ACCOUNT  "9999-1"
#define RETRIED_1S    "paygw_worker_retried_total{delay_ms=\"1000\"}"

static te2e e;

/* Calls of the pre-check's statement against this test's database since it was made. */
static long long prechecks(void)
{
    return tdb_long(e.db,
                    "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND query LIKE 'SELECT event_id FROM inbox WHERE event_id = ANY%'",
                    NULL);
}

static void run(void)
{
    const char *env[] = {"BANK_SIM_RULES=001/" LATE_ACCOUNT ":fail-first=2",
                         "RETRY_DELAYS_MS=1000,5000", NULL};
    char *plain = te2e_payment_json(PLAIN_EVENT, PLAIN_PAYMENT, 2500, "001", "1234-5");
    char *late = te2e_payment_json(LATE_EVENT, LATE_PAYMENT, 2600, "001", LATE_ACCOUNT);
    tprog worker = {0};
    tmq *m = NULL;

    if (!CHECK(tdb_exec(e.db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", NULL)) ||
        !CHECK(te2e_insert_payment(e.db, PLAIN_EVENT, PLAIN_PAYMENT, 2500, "001", "1234-5")) ||
        !CHECK(te2e_insert_payment(e.db, LATE_EVENT, LATE_PAYMENT, 2600, "001", LATE_ACCOUNT)) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "worker_precheck-worker", &e, env)))
        goto out;
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL))
        goto out;

    /* every answer "executed": the duplicate is found by the settle itself */
    CHECK(te2e_publish_attempt(m, PLAIN_EVENT, plain, 1));
    CHECK_INT(te2e_wait_metric(&worker, 1, "paygw_worker_settled_total", 1, 20000), 1);
    CHECK(te2e_publish_attempt(m, PLAIN_EVENT, plain, 1));
    CHECK_INT(te2e_wait_metric(&worker, 1, "paygw_worker_duplicates_skipped_total", 1, 20000), 1);
    CHECK_INT(prechecks(), 0);

    /* a "transient" answer for a copy whose effect is committed: the pre-check decides */
    CHECK(te2e_publish_attempt(m, LATE_EVENT, late, 3));
    CHECK_INT(te2e_wait_metric(&worker, 1, "paygw_worker_settled_total", 2, 20000), 2);
    CHECK(te2e_publish_attempt(m, LATE_EVENT, late, 1));
    CHECK_INT(te2e_wait_metric(&worker, 1, "paygw_worker_duplicates_skipped_total", 2, 20000), 2);
    CHECK(prechecks() >= 1);
    tproc_sleep_ms(1500); /* a copy sent to the 1 s delay queue would be back by now */
    CHECK_INT(tprog_metric(&worker, "paygw_worker_delivered_total"), 4);
    CHECK_INT(tprog_metric(&worker, RETRIED_1S), 0);

    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), 2);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 4);
    CHECK_LEDGER_BALANCED(e.db);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE payment_id = $1 AND status = 'settled' "
                       "AND attempts = 3",
                       LATE_PAYMENT, NULL),
              1);
    CHECK_INT(tmq_depth(m, "payments.settlement"), 0);
    CHECK_INT(tmq_depth(m, "payments.settlement.dlq"), 0);
    CHECK_INT(tproc_log_count(worker.proc, "event=duplicate_skipped"), 2);
out:
    tmq_close(m);
    tprog_stop(&worker, 10000);
    free(plain);
    free(late);
}

int main(void)
{
    return te2e_main("worker_precheck", &e, run);
}
