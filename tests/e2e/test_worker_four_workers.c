/*
 * tests/e2e/test_worker_four_workers.c - four workers, 5,000 events, 1,000 duplicates mixed in
 *
 * 5,000 payment rows; four payments-worker processes consume at once while
 * 6,000 messages are published: each event once, and every fifth event a
 * second time right after itself, so the two copies usually reach two
 * workers at the same moment (the inbox's unique key decides). In the end
 * every event has exactly one balanced effect (a debit and a credit of the
 * payment's amount), the credits add up to the settled amounts, the inbox has
 * 5,000 rows, the workers counted 1,000 duplicates, and the queue is empty.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define EVENTS    5000
#define EVERY     5 /* every EVERY-th event is published twice */
#define WORKERS   4
#define SETTLE_MS 120000

static te2e e;

static void run(void)
{
    tprog workers[WORKERS] = {0};
    long long t0, settled, inbox;
    double took, dups;
    tmq *m = NULL;

    if (!CHECK(te2e_seed(e.db, "fw", EVENTS, false)))
        return;
    for (int i = 0; i < WORKERS; i++) {
        char label[48];

        snprintf(label, sizeof label, "four_workers-w%d", i);
        if (!CHECK(tprog_start(&workers[i], TPROG_WORKER, label, &e, NULL)))
            goto stop;
    }
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL))
        goto stop;
    t0 = tproc_now_ms();
    CHECK(te2e_publish_events(m, "fw", EVENTS, EVERY));
    printf("published %d messages in %.2f s\n", EVENTS + EVENTS / EVERY, te2e_elapsed_s(t0));

    settled = te2e_wait_long(e.db, "SELECT count(*) FROM payments WHERE status = 'settled'", EVENTS,
                             SETTLE_MS, 50);
    took = te2e_elapsed_s(t0);
    CHECK_INT(settled, EVENTS);
    printf("%lld events settled by %d workers in %.2f s (%.0f events/s)\n", settled, WORKERS, took,
           (double)settled / took);
    /* the duplicates are acked after the last settle: wait for the counters too */
    dups = te2e_wait_metric(workers, WORKERS, "paygw_worker_duplicates_skipped_total",
                            EVENTS / EVERY, 20000);
    CHECK_INT(dups, EVENTS / EVERY);
    for (int i = 0; i < WORKERS; i++)
        printf("worker %d: settled %.0f, duplicates %.0f\n", i,
               tprog_metric(&workers[i], "paygw_worker_settled_total"),
               tprog_metric(&workers[i], "paygw_worker_duplicates_skipped_total"));
    CHECK_INT(tprog_sum(workers, WORKERS, "paygw_worker_settled_total"), EVENTS);
    CHECK_INT(tprog_sum(workers, WORKERS, "paygw_worker_dead_lettered_total{reason=\"invalid\"}"),
              0);

    inbox = tdb_long(e.db, "SELECT count(*) FROM inbox", NULL);
    CHECK_INT(inbox, EVENTS);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2 * EVENTS);
    /* one balanced effect per event: a debit and a credit, each of the payment's amount */
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM (SELECT l.event_id FROM ledger_entries l "
                       "JOIN payments p USING (event_id) GROUP BY l.event_id, p.amount_cents "
                       "HAVING count(*) = 2 "
                       "AND count(*) FILTER (WHERE l.side = 'debit' AND l.amount_cents = "
                       "p.amount_cents) = 1 "
                       "AND count(*) FILTER (WHERE l.side = 'credit' AND l.amount_cents = "
                       "p.amount_cents) = 1) ok",
                       NULL),
              EVENTS);
    CHECK_INT(
        tdb_long(e.db,
                 "SELECT (SELECT sum(amount_cents) FROM ledger_entries WHERE side = 'credit') "
                 "- (SELECT sum(amount_cents) FROM payments WHERE status = 'settled')",
                 NULL),
        0);
    CHECK_LEDGER_BALANCED(e.db);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM inbox i JOIN payments p USING (event_id) "
                       "WHERE p.status = 'settled' AND i.attempt = 1 AND p.attempts = 1",
                       NULL),
              EVENTS);
    CHECK_INT(tmq_depth(m, "payments.settlement"), 0);
    CHECK_INT(tmq_depth(m, "payments.settlement.dlq"), 0);
stop:
    tmq_close(m);
    for (int i = 0; i < WORKERS; i++)
        tprog_stop(&workers[i], 10000);
}

int main(void)
{
    return te2e_main("worker_four_workers", &e, run);
}
