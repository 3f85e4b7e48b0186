/*
 * tests/e2e/test_relay_lanes.c - one relay keeps two batches in flight
 *
 * 5,000 pending outbox rows (five batches of at most 1,024) and one
 * payments-relay: while one lane waits for its confirms, the other lane's
 * batch is already claimed and published (docs/payments-relay.md), so every
 * batch after the first starts with another in flight. Every row ends
 * published, once, and the queue holds each event once.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define ROWS     5000
#define DRAIN_MS 60000

static te2e e;

static void run(void)
{
    tprog relay = {0};
    long long t0, published;
    double overlapped, batches;
    tmq *m;

    if (!CHECK(te2e_seed(e.db, "rl", ROWS, true)))
        return;
    t0 = tproc_now_ms();
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_lanes-relay", &e, NULL)))
        return;
    published = te2e_wait_long(e.db, "SELECT count(*) FROM outbox WHERE state = 'published'", ROWS,
                               DRAIN_MS, 20);
    CHECK_INT(published, ROWS);
    printf("%lld rows published in %.2f s\n", published, te2e_elapsed_s(t0));
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM payments WHERE status <> 'published'", NULL), 0);
    CHECK_INT((long long)tprog_metric(&relay, "paygw_relay_confirmed_total"), ROWS);

    /* five full or partial batches: the last four each started beside another */
    batches = tprog_metric(&relay, "paygw_relay_batch_size_count");
    overlapped = tprog_metric(&relay, "paygw_relay_batches_overlapped_total");
    printf("batches %.0f, started while another was in flight %.0f\n", batches, overlapped);
    CHECK(batches >= 5);
    CHECK(overlapped >= batches - 1);

    m = tmq_connect(e.amqp_url);
    if (CHECK(m != NULL)) {
        CHECK_INT(tmq_depth(m, "payments.settlement"), ROWS);
        tmq_close(m);
    }
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("relay_lanes", &e, run);
}
