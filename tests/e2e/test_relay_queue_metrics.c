/*
 * tests/e2e/test_relay_queue_metrics.c - the broker's counts and the readiness gauges on /metrics
 *
 * payments-relay asks the broker every 5 s for the ready messages and the
 * consumers of payments.settlement and its DLQ (paygw_queue_messages,
 * paygw_queue_consumers), and both the relay and the worker show /readyz as
 * paygw_database_ready and paygw_broker_ready. With the relay alone the
 * settlement queue has no consumer; two messages put straight into the DLQ
 * are counted; a worker makes it one consumer, and its stop makes it none again.
 */
#include <stdio.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"
#include "tests/support/tproc.h"

#define WAIT_MS 20000 /* a few of the relay's 5 s rounds */

#define SETTLEMENT_CONSUMERS "paygw_queue_consumers{queue=\"payments.settlement\"}"
#define DLQ_MESSAGES         "paygw_queue_messages{queue=\"payments.settlement.dlq\"}"

static te2e e;

/* Poll @name on @p until it equals @want or WAIT_MS pass; the last value (-1: absent). */
static double wait_value(const tprog *p, const char *name, double want)
{
    long long deadline = tproc_now_ms() + WAIT_MS;
    double v;

    while ((v = tprog_metric(p, name)) != want && tproc_now_ms() < deadline)
        tproc_sleep_ms(100);
    return v;
}

static bool put_in_dlq(tmq *m, const char *message_id)
{
    tmq_pub p = {
        .exchange = "",
        .routing_key = "payments.settlement.dlq",
        .body = "{}",
        .message_id = message_id,
        .attempt = 1,
        .mandatory = true,
    };

    return tmq_publish(m, &p) == 1;
}

static void run(void)
{
    tprog relay = {0}, worker = {0};
    tmq *m = NULL;

    /* the relay declares the topology before it reports the broker ready */
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_queue_metrics-relay", &e, NULL)))
        return;
    CHECK_INT(wait_value(&relay, "paygw_database_ready", 1), 1);
    CHECK_INT(wait_value(&relay, "paygw_broker_ready", 1), 1);
    CHECK_INT(wait_value(&relay, SETTLEMENT_CONSUMERS, 0), 0);
    CHECK_INT(tprog_metric(&relay, "paygw_queue_consumers{queue=\"payments.settlement.dlq\"}"), 0);

    m = tmq_connect(e.amqp_url);
    if (CHECK(m != NULL)) {
        CHECK(put_in_dlq(m, "rqm-1"));
        CHECK(put_in_dlq(m, "rqm-2"));
        tmq_close(m);
    }
    CHECK_INT(wait_value(&relay, DLQ_MESSAGES, 2), 2);
    CHECK_INT(tprog_metric(&relay, "paygw_queue_messages{queue=\"payments.settlement\"}"), 0);

    if (CHECK(tprog_start(&worker, TPROG_WORKER, "relay_queue_metrics-worker", &e, NULL))) {
        CHECK_INT(tprog_metric(&worker, "paygw_database_ready"), 1);
        CHECK_INT(tprog_metric(&worker, "paygw_broker_ready"), 1);
        CHECK_INT(wait_value(&relay, SETTLEMENT_CONSUMERS, 1), 1);
        CHECK_INT(tprog_stop(&worker, 10000), 0);
        CHECK_INT(wait_value(&relay, SETTLEMENT_CONSUMERS, 0), 0);
    }
    CHECK_INT(tprog_metric(&relay, DLQ_MESSAGES), 2); /* nobody took them */
    CHECK_INT(tprog_stop(&relay, 10000), 0);
    tprog_free(&worker);
    tprog_free(&relay);
}

int main(void)
{
    return te2e_main("relay_queue_metrics", &e, run);
}
