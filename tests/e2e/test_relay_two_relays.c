/*
 * tests/e2e/test_relay_two_relays.c - two relays drain one outbox side by side
 *
 * 5,000 pending outbox rows, two payments-relay processes at once: every row
 * ends published, none stays pending, and the queue holds each event exactly
 * once (FOR UPDATE SKIP LOCKED: the relays never claim the same row).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define ROWS     5000
#define DRAIN_MS 60000

static te2e e;

/* Each of the ROWS events exactly once, nothing else. */
static void check_exactly_once(const tmq_msg *msgs, size_t n)
{
    int *counts = te2e_event_counts(msgs, n, "rr", ROWS);
    int missing = 0, dup = 0, distinct = 0;

    for (int i = 1; i <= ROWS; i++) {
        if (counts[i] == 0 && missing++ < 5)
            FAIL("event rr-e%d is not in the queue", i);
        if (counts[i] > 1 && dup++ < 5)
            FAIL("event rr-e%d is %d times in the queue", i, counts[i]);
        distinct += counts[i] > 0;
    }
    printf("queue: %zu messages, %d distinct events, %d duplicated, %d missing, %d foreign\n", n,
           distinct, dup, missing, counts[0]);
    CHECK_INT(n, ROWS);
    CHECK_INT(distinct, ROWS);
    CHECK_INT(dup, 0);
    CHECK_INT(counts[0], 0);
    free(counts);
}

static void run(void)
{
    tprog relays[2] = {0};
    long long t0, published;
    double took, c0, c1;
    tmq *m;
    tmq_msg *msgs;
    size_t n = 0;

    if (!CHECK(te2e_seed(e.db, "rr", ROWS, true)))
        return;
    t0 = tproc_now_ms();
    if (!CHECK(tprog_start(&relays[0], TPROG_RELAY, "two_relays-a", &e, NULL)) ||
        !CHECK(tprog_start(&relays[1], TPROG_RELAY, "two_relays-b", &e, NULL)))
        goto stop;

    published = te2e_wait_long(e.db, "SELECT count(*) FROM outbox WHERE state = 'published'", ROWS,
                               DRAIN_MS, 20);
    took = te2e_elapsed_s(t0);
    CHECK_INT(published, ROWS);
    printf("%lld rows published by two relays in %.2f s (%.0f rows/s, including start-up)\n",
           published, took, (double)published / took);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM outbox WHERE state <> 'published'", NULL), 0);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM payments WHERE status <> 'published'", NULL), 0);

    c0 = tprog_metric(&relays[0], "paygw_relay_confirmed_total");
    c1 = tprog_metric(&relays[1], "paygw_relay_confirmed_total");
    printf("confirmed: relay a %.0f, relay b %.0f\n", c0, c1);
    CHECK_INT((long long)(c0 + c1), ROWS);
    CHECK_INT(tprog_sum(relays, 2, "paygw_relay_returned_total"), 0);

    m = tmq_connect(e.amqp_url);
    if (CHECK(m != NULL)) {
        long long t1 = tproc_now_ms();

        CHECK_INT(tmq_depth(m, "payments.settlement"), ROWS);
        msgs = tmq_read_all(m, "payments.settlement", true, &n);
        printf("read %zu messages in %.2f s\n", n, te2e_elapsed_s(t1));
        if (CHECK(msgs != NULL))
            check_exactly_once(msgs, n);
        tmq_msgs_free(msgs, n);
        tmq_close(m);
    }
stop:
    tprog_stop(&relays[0], 10000);
    tprog_stop(&relays[1], 10000);
}

int main(void)
{
    return te2e_main("relay_two_relays", &e, run);
}
