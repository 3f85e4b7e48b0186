/*
 * tests/e2e/test_relay_sigterm.c - SIGTERM while the relay publishes
 *
 * 3,000 pending rows; the relay is slowed a little (failpoint
 * relay.after_publish=sleep=40: between the confirms of a batch and its
 * marks) so the signal lands mid-way. It must exit 0 within 10 s after
 * finishing the batch in flight: every row marked published has its message
 * in the queue (never a mark without a confirm), and no message sits in the
 * queue for a row left pending. A second relay then publishes the rest, and
 * the queue holds each of the 3,000 events exactly once.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define ROWS 3000

static te2e e;

/* Rows marked published now, as a bitmap over 1..ROWS. */
static unsigned char *published_rows(long long *count)
{
    return te2e_event_set(e.db,
                          "SELECT coalesce(string_agg(substr(event_id, 5), ',' ORDER BY id), '') "
                          "FROM outbox WHERE state = 'published'",
                          ROWS, count);
}

static void run(void)
{
    const char *slow[] = {"GATEWAY_FAILPOINTS=relay.after_publish=sleep=40", NULL};
    tprog relay = {0}, second = {0};
    long long at_signal, marked_n, t0, t_sig;
    unsigned char *marked;
    int *counts;
    int status, unmarked_in_queue = 0, marked_missing = 0;
    tmq *m;
    tmq_msg *msgs;
    size_t n = 0;

    if (!CHECK(te2e_seed(e.db, "rs", ROWS, true)))
        return;
    t0 = tproc_now_ms();
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_sigterm-relay", &e, slow)))
        return;
    /* the first batches go out; then the signal, while more are in flight */
    at_signal = te2e_wait_long(
        e.db, "SELECT least(count(*), 512) FROM outbox WHERE state = 'published'", 512, 20000, 5);
    CHECK_INT(at_signal, 512);
    t_sig = tproc_now_ms();
    tproc_signal(relay.proc, SIGTERM);
    status = tproc_wait_exit(relay.proc, 10000);
    printf("relay exited with status %d %lld ms after SIGTERM (%.2f s after start)\n", status,
           tproc_now_ms() - t_sig, te2e_elapsed_s(t0));
    CHECK_INT(status, 0);
    CHECK(tproc_log_contains(relay.proc, "event=stopped"));
    if (status != 0)
        tproc_print_log_tail(relay.proc, 40);
    tprog_free(&relay);

    marked = published_rows(&marked_n);
    printf("%lld of %d rows marked published when the relay stopped\n", marked_n, ROWS);
    CHECK(marked_n >= 512);
    if (marked_n == ROWS)
        printf("note: the relay finished everything before the signal took effect\n");

    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL)) {
        free(marked);
        return;
    }
    /* look without taking: the messages stay for the check at the end */
    msgs = tmq_read_all(m, "payments.settlement", false, &n);
    CHECK(msgs != NULL);
    counts = te2e_event_counts(msgs, n, "rs", ROWS);
    for (int i = 1; i <= ROWS; i++) {
        if (marked[i] && counts[i] == 0 && marked_missing++ < 5)
            FAIL("row rs-e%d is marked published but its message is not in the queue", i);
        if (!marked[i] && counts[i] > 0 && unmarked_in_queue++ < 5)
            FAIL("rs-e%d is in the queue but its row is still pending: the batch in flight "
                 "was not finished",
                 i);
        if (counts[i] > 1)
            FAIL("rs-e%d is %d times in the queue", i, counts[i]);
    }
    CHECK_INT(marked_missing, 0);
    CHECK_INT(unmarked_in_queue, 0);
    CHECK_INT(counts[0], 0);
    CHECK_INT(n, marked_n);
    free(counts);
    tmq_msgs_free(msgs, n);
    tmq_close(m); /* the messages go back to the queue */
    free(marked);

    /* a new relay publishes the rest; nothing twice */
    if (!CHECK(tprog_start(&second, TPROG_RELAY, "relay_sigterm-second", &e, NULL)))
        return;
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM outbox WHERE state = 'published'", ROWS, 30000, 20);
    m = tmq_connect(e.amqp_url);
    if (CHECK(m != NULL)) {
        int missing = 0, twice = 0;

        msgs = tmq_read_all(m, "payments.settlement", true, &n);
        counts = te2e_event_counts(msgs, n, "rs", ROWS);
        for (int i = 1; i <= ROWS; i++) {
            missing += counts[i] == 0;
            twice += counts[i] > 1;
        }
        printf("after the second relay: %zu messages, %d missing, %d more than once\n", n, missing,
               twice);
        CHECK_INT(n, ROWS);
        CHECK_INT(missing, 0);
        CHECK_INT(twice, 0);
        free(counts);
        tmq_msgs_free(msgs, n);
        tmq_close(m);
    }
    tprog_stop(&second, 10000);
}

int main(void)
{
    return te2e_main("relay_sigterm", &e, run);
}
