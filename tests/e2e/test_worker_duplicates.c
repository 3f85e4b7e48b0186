/*
 * tests/e2e/test_worker_duplicates.c - the same event five times: one effect
 *
 * One payment row; its event published five times to payments.events
 * (routing key payment.pix.approved, message_id = event_id, x-attempt 1), as
 * a relay that crashed before marking would. payments-worker settles it once
 * and acks the other four as duplicates: two ledger lines, one inbox row,
 * paygw_worker_duplicates_skipped_total 4, an empty queue.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define EVENT   "evt-dup-1"
#define PAYMENT "pay-dup-1"

static te2e e;

static void run(void)
{
    char *body = te2e_payment_json(EVENT, PAYMENT, 2500, "001", "1234-5");
    tprog worker = {0};
    tmq *m = NULL;
    long long t0;
    double dups;

    if (!CHECK(te2e_insert_payment(e.db, EVENT, PAYMENT, 2500, "001", "1234-5")) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "worker_duplicates-worker", &e, NULL)))
        goto out;
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL))
        goto out;
    t0 = tproc_now_ms();
    for (int i = 0; i < 5; i++)
        CHECK(te2e_publish_event(m, EVENT, body));

    dups = te2e_wait_metric(&worker, 1, "paygw_worker_duplicates_skipped_total", 4, 20000);
    printf("5 deliveries handled in %.2f s\n", te2e_elapsed_s(t0));
    CHECK_INT(dups, 4);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_settled_total"), 1);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_delivered_total"), 5);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), 1);
    CHECK_INT(
        tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = $1", EVENT, NULL), 2);
    CHECK_LEDGER_BALANCED(e.db);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE status = 'settled' AND attempts = 1",
                       NULL),
              1);
    CHECK_INT(tmq_depth(m, "payments.settlement"), 0);
    CHECK_INT(tmq_depth(m, "payments.settlement.dlq"), 0);
    CHECK_INT(tproc_log_count(worker.proc, "event=duplicate_skipped"), 4);
out:
    tmq_close(m);
    tprog_stop(&worker, 10000);
    free(body);
}

int main(void)
{
    return te2e_main("worker_duplicates", &e, run);
}
