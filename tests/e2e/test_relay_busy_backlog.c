/*
 * tests/e2e/test_relay_busy_backlog.c - a relay at its limit still reports its backlog
 *
 * 40,000 pending outbox rows and one payments-relay: every claim comes back
 * full and a lane is always in flight, so the relay never waits for work. Its
 * housekeeping (paygw_outbox_backlog every 2 s, the rearm, the purge) must not
 * wait for an idle moment that does not come: while rows are still pending,
 * the gauge shows them, and it goes down as they are published. (It used to
 * run only between batches, and read 0 through a whole drain.)
 */
#include <stdio.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tcheck.h"

#define ROWS     40000
#define DRAIN_MS 120000

static te2e e;

static void run(void)
{
    tprog relay = {0};
    long long t0, pending = ROWS, deadline;
    double gauge, first = 0, last = 0;
    int seen = 0;

    if (!CHECK(te2e_seed(e.db, "rb", ROWS, true)))
        return;
    t0 = tproc_now_ms();
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_busy_backlog-relay", &e, NULL)))
        return;
    deadline = t0 + DRAIN_MS;
    while (pending > 0 && tproc_now_ms() < deadline) {
        gauge = tprog_metric(&relay, "paygw_outbox_backlog");
        pending = tdb_long(e.db, "SELECT count(*) FROM outbox WHERE state = 'pending'", NULL);
        if (gauge > 0 && pending > 0) {
            if (seen++ == 0)
                first = gauge;
            last = gauge;
        }
        tproc_sleep_ms(100);
    }
    printf("drained in %.2f s; the gauge read %d times above 0 while rows were pending, "
           "first %.0f, last %.0f\n",
           te2e_elapsed_s(t0), seen, first, last);
    CHECK_INT(pending, 0);
    CHECK(seen > 0);
    CHECK(first > last); /* refreshed during the drain, not once */
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("relay_busy_backlog", &e, run);
}
