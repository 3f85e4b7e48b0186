/*
 * tests/e2e/test_relay_wakeup.c - a NOTIFY that arrives while the relay is busy still wakes it
 *
 * The relay LISTENs on paygw_outbox and polls every second as a fallback
 * (docs/architecture.md). A wake-up sent while its batch transaction is open is
 * delivered at that transaction's COMMIT, where libpq reads it along with the
 * COMMIT's answer and queues it: the socket has nothing left to read. The
 * relay must still act on it at once, not a polling interval later.
 *
 * Row A is committed and notified; the relay's batch for A is held open 200
 * ms (failpoint relay.after_publish=sleep=200); meanwhile row B is committed
 * and notified. B must be published within 900 ms (its own batch takes 200 ms
 * of that); a relay that misses the queued notification takes about 1.4 s.
 * Measured three times.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tcheck.h"

#define ROUNDS 3

static te2e e;

static bool insert_row(const char *event_id, const char *payment_id)
{
    char *body = te2e_payment_json(event_id, payment_id, 100, "001", "1234-5");
    bool ok = te2e_insert_payment(e.db, event_id, payment_id, 100, "001", "1234-5") &&
              tdb_exec(e.db,
                       "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                       "VALUES ($1, $2, 'payment.pix.approved', $3)",
                       event_id, payment_id, body, NULL) &&
              tdb_exec(e.db, "NOTIFY paygw_outbox", NULL);

    free(body);
    return ok;
}

static long long wait_published(const char *event_id, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;

    while (tproc_now_ms() < deadline) {
        if (tdb_long(e.db,
                     "SELECT count(*) FROM outbox WHERE event_id = $1 AND state = 'published'",
                     event_id, NULL) == 1)
            return tproc_now_ms();
        tproc_sleep_ms(5);
    }
    return -1;
}

static void run(void)
{
    const char *slow[] = {"GATEWAY_FAILPOINTS=relay.after_publish=sleep=200", NULL};
    tprog relay = {0};

    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_wakeup-relay", &e, slow)))
        return;
    tproc_sleep_ms(1500); /* past the first polls: the relay waits for work */
    for (int i = 0; i < ROUNDS; i++) {
        char ea[32], pa[32], eb[32], pb[32];
        long long t_b, done;

        snprintf(ea, sizeof ea, "wake-a%d", i);
        snprintf(pa, sizeof pa, "wake-pa%d", i);
        snprintf(eb, sizeof eb, "wake-b%d", i);
        snprintf(pb, sizeof pb, "wake-pb%d", i);
        tcheck_context("round %d", i);
        CHECK(insert_row(ea, pa));
        tproc_sleep_ms(60); /* the relay has claimed A and sits in its batch */
        t_b = tproc_now_ms();
        CHECK(insert_row(eb, pb));
        done = wait_published(eb, 10000);
        CHECK(done > 0);
        printf("round %d: B published %lld ms after its NOTIFY\n", i, done - t_b);
        if (done - t_b > 900)
            FAIL("B took %lld ms: the relay missed a wake-up that came during its batch",
                 done - t_b);
        tproc_sleep_ms(1200);
    }
    tcheck_context_clear();
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("relay_wakeup", &e, run);
}
