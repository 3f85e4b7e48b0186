/*
 * tests/cluster/test_cluster_retry_leader.c - a retry queue's leader killed between attempts
 *
 * A payment to a bank down for two attempts (fail-first=2) on quorum queues,
 * with retry delays of 3 s and 20 s (room for a node's restart in between: a
 * restart takes 12-15 s on a busy 2-core machine, and with 12 s attempt 3 once
 * came before the test was back to look). While its copy waits in
 * payments.retry.3000, and again in payments.retry.20000, the node holding
 * that queue's leader is killed, and started again. The copy survives both
 * (the queues are replicated and dead-letter at least once): the payment
 * settles on attempt 3, once.
 * When the kill lands as the copy's delay ends, RabbitMQ 3.10 was once seen
 * not to hand it on within 40 s; the relay then publishes the payment again
 * from the outbox (RETRY_LOST_AFTER_SECONDS=30 here, sql/0014), which is the
 * guarantee a payment rests on. Either way: attempt 3, one effect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/cluster/tcluster.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

static te2e e;

static const char *const status_sql = "SELECT status || '/' || attempts FROM payments "
                                      "WHERE event_id = 'rl-1'";

/* Wait until the payment is retrying with @attempts, then kill @queue's leader; its K (or -1). */
static int kill_while_waiting(int attempts, const char *queue)
{
    char want[32];
    long long deadline = tproc_now_ms() + 15000;
    char *st = NULL;
    int k;

    snprintf(want, sizeof want, "retrying/%d", attempts);
    while (tproc_now_ms() < deadline) {
        free(st);
        st = tdb_value(e.db, status_sql, NULL);
        if (st != NULL && strcmp(st, want) == 0)
            break;
        tproc_sleep_ms(20);
    }
    printf("payment %s\n", st ? st : "(none)");
    CHECK(st != NULL && strcmp(st, want) == 0);
    free(st);
    k = tcluster_leader(&e, queue);
    printf("leader of %s on broker-%d\n", queue, k);
    if (!CHECK(k >= 1))
        return -1;
    CHECK(tcluster_node("kill", k));
    return k;
}

static void run(void)
{
    const char *extra[] = {"BANK_SIM_RULES=001/9999-1:fail-first=2", "RETRY_DELAYS_MS=3000,20000",
                           "RETRY_LOST_AFTER_SECONDS=30", NULL};
    tcluster c = {0};
    int k;
    thttp_resp r;
    json_t *o;
    char *body, *s;
    tguard g;

    tcluster_guard(&g, "broker");
    if (!tcluster_start(&c, &e, "cluster_retry_leader", extra))
        goto out;
    s = tapi_payment("rl-1", "rl-1");
    o = json_loads(s, 0, NULL);
    free(s);
    json_object_set_new(json_object_get(o, "payee"), "account", json_string("9999-1"));
    body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    tapi_post(&c.api, body, NULL, &r);
    free(body);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);

    /* a node's restart takes longer than the first delay: attempt 2 runs without it */
    if ((k = kill_while_waiting(1, "payments.retry.3000")) > 0)
        CHECK(tcluster_node("start", k));
    if ((k = kill_while_waiting(2, "payments.retry.20000")) > 0)
        CHECK(tcluster_node("start", k));
    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM payments WHERE event_id = 'rl-1' "
                    "AND status = 'settled' AND attempts = 3",
                    1, 40000, 100);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = 'rl-1'", NULL),
              2);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox WHERE event_id = 'rl-1'", NULL), 1);
    printf("copies published again from the outbox: %.0f\n",
           tprog_metric(&c.relay, "paygw_relay_retries_rearmed_total"));
out:
    tcluster_finish(&c, &g);
}

int main(void)
{
    return te2e_main("cluster_retry_leader", &e, run);
}
