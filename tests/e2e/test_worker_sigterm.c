/*
 * tests/e2e/test_worker_sigterm.c - SIGTERM a worker in the middle of 2,000 events
 *
 * 2,000 payment rows and their 2,000 messages; one payments-worker settles
 * them and gets SIGTERM once 300 are done. It must exit 0 within 10 s. Then:
 * every inbox row has its two ledger lines and its payment settled (nothing
 * half-done), every payment not settled still has its message in the queue,
 * and no settled one has (what was committed was acked). A second worker
 * settles the rest: 2,000 settled, each exactly once, and no duplicate seen
 * (nothing was committed without its ack).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define EVENTS    2000
#define AT_SIGNAL 300

static te2e e;

/* Settled payments as a bitmap over 1..EVENTS (from the inbox). */
static unsigned char *settled_events(long long *count)
{
    return te2e_event_set(e.db,
                          "SELECT coalesce(string_agg(substr(event_id, 5), ','), '') FROM payments "
                          "WHERE status = 'settled'",
                          EVENTS, count);
}

static void check_after_stop(void)
{
    long long nsettled;
    unsigned char *done = settled_events(&nsettled);
    int *counts, lost = 0, unacked = 0;
    tmq_msg *msgs;
    size_t n = 0;
    tmq *m;

    printf("%lld of %d settled when the worker stopped\n", nsettled, EVENTS);
    CHECK(nsettled >= AT_SIGNAL);
    if (nsettled == EVENTS)
        printf("note: the worker settled everything before the signal took effect\n");
    /* nothing half-done */
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), nsettled);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2 * nsettled);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM inbox i WHERE (SELECT count(*) FROM ledger_entries l "
                       "WHERE l.event_id = i.event_id) <> 2 OR NOT EXISTS (SELECT 1 FROM "
                       "payments p WHERE p.event_id = i.event_id AND p.status = 'settled')",
                       NULL),
              0);

    /* every payment not settled still has its message; no settled one has */
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL)) {
        free(done);
        return;
    }
    msgs = tmq_read_all(m, "payments.settlement", false, &n); /* back on close */
    CHECK(msgs != NULL);
    counts = te2e_event_counts(msgs, n, "ws", EVENTS);
    for (int i = 1; i <= EVENTS; i++) {
        if (!done[i] && counts[i] == 0 && lost++ < 5)
            FAIL("ws-e%d is not settled and its message is gone", i);
        if (done[i] && counts[i] > 0 && unacked++ < 5)
            FAIL("ws-e%d is settled but its message is still in the queue (not acked)", i);
    }
    printf("queue after the stop: %zu messages\n", n);
    CHECK_INT(lost, 0);
    CHECK_INT(unacked, 0);
    CHECK_INT(counts[0], 0);
    CHECK_INT(n, EVENTS - nsettled);
    free(counts);
    tmq_msgs_free(msgs, n);
    tmq_close(m);
    free(done);
}

static void run(void)
{
    tprog first = {0}, second = {0};
    long long t0, t_sig, at;
    tmq *m = NULL;
    int status;
    double took;

    if (!CHECK(te2e_seed(e.db, "ws", EVENTS, false)) ||
        !CHECK(tprog_start(&first, TPROG_WORKER, "worker_sigterm-first", &e, NULL)))
        return;
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL)) {
        tprog_stop(&first, 0);
        return;
    }
    t0 = tproc_now_ms();
    CHECK(te2e_publish_events(m, "ws", EVENTS, 0));
    tmq_close(m);

    at = te2e_wait_long(e.db, "SELECT least(count(*), 300) FROM inbox", AT_SIGNAL, 30000, 5);
    CHECK_INT(at, AT_SIGNAL);
    t_sig = tproc_now_ms();
    tproc_signal(first.proc, SIGTERM);
    status = tproc_wait_exit(first.proc, 10000);
    printf("worker exited with status %d %lld ms after SIGTERM\n", status, tproc_now_ms() - t_sig);
    CHECK_INT(status, 0);
    CHECK(tproc_log_contains(first.proc, "event=stopped status=0"));
    if (status != 0)
        tproc_print_log_tail(first.proc, 40);
    tprog_free(&first);

    check_after_stop();

    /* a second worker settles the rest, each once */
    if (!CHECK(tprog_start(&second, TPROG_WORKER, "worker_sigterm-second", &e, NULL)))
        return;
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM payments WHERE status = 'settled'", EVENTS, 60000,
                    20);
    took = te2e_elapsed_s(t0);
    printf("all %d settled %.2f s after the first publish\n", EVENTS, took);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), EVENTS);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2 * EVENTS);
    CHECK_INT(
        tdb_long(e.db,
                 "SELECT count(*) FROM (SELECT event_id FROM ledger_entries GROUP BY event_id "
                 "HAVING count(*) FILTER (WHERE side = 'debit') = 1 "
                 "AND count(*) FILTER (WHERE side = 'credit') = 1 "
                 "AND sum(amount_cents) FILTER (WHERE side = 'debit') = "
                 "sum(amount_cents) FILTER (WHERE side = 'credit')) ok",
                 NULL),
        EVENTS);
    CHECK_INT(tprog_metric(&second, "paygw_worker_duplicates_skipped_total"), 0);
    m = tmq_connect(e.amqp_url);
    if (CHECK(m != NULL)) {
        CHECK_INT(tmq_depth(m, "payments.settlement"), 0);
        CHECK_INT(tmq_depth(m, "payments.settlement.dlq"), 0);
        tmq_close(m);
    }
    tprog_stop(&second, 10000);
}

int main(void)
{
    return te2e_main("worker_sigterm", &e, run);
}
