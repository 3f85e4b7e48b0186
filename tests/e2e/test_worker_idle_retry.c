/*
 * tests/e2e/test_worker_idle_retry.c - a retry after a quiet spell goes out on the
 * connection the worker already has
 *
 * Nothing reads the worker's retry publisher while no payment is retried, so nothing
 * answered the broker's heartbeats there: three intervals after the last retry the
 * broker closed it, and the next retry copy failed on it (mq_publish_failed), which made
 * the worker drop both connections and take its deliveries back again. With
 * AMQP_HEARTBEAT_S=1 the worker idles for 6 s, then a payment to a bank that fails once
 * must be retried on the first try: settled with attempts 2, no failed retry publish, no
 * reconnect (paygw_amqp_connects_total stays at the two connections of the start) and
 * two deliveries, not three. The relay idles as long on its publisher (it answers heartbeats
 * as the broker sends them) and publishes the payment on its first connection too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"

#define IDLE_MS   6000 /* six heartbeat intervals: the broker gives up after three */
#define SETTLE_MS 20000

static te2e e;

static void run(void)
{
    const char *env[] = {"BANK_SIM_RULES=001/9999-1:fail-first=1", "RETRY_DELAYS_MS=1000,5000",
                         "AMQP_HEARTBEAT_S=1", NULL};
    char amqp_env[600];
    const char *api_extra[] = {amqp_env, NULL};
    tprog relay = {0}, worker = {0};
    tapi a = {0};
    double connects, relay_connects;
    thttp_resp r;
    json_t *o;
    char *body, *s;

    snprintf(amqp_env, sizeof amqp_env, "AMQP_URL=%s", e.amqp_url);
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "worker_idle_retry-relay", &e, env)) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "worker_idle_retry-worker", &e, env)) ||
        !CHECK(tapi_start(&a, "worker_idle_retry-api", tdb_url(e.db), api_extra)))
        goto stop;
    connects = tprog_metric(&worker, "paygw_amqp_connects_total");
    CHECK(connects == 2); /* the consumer and the retry publisher */
    relay_connects = tprog_metric(&relay, "paygw_amqp_connects_total");
    CHECK(relay_connects >= 1);
    printf("worker connected (%g connections); idle for %d ms\n", connects, IDLE_MS);
    tproc_sleep_ms(IDLE_MS);

    s = tapi_payment("evt-idle-retry-1", "pay-idle-retry-1");
    o = json_loads(s, 0, NULL);
    free(s);
    json_object_set_new(json_object_get(o, "payee"), "account", json_string("9999-1"));
    body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    tapi_post(&a, body, NULL, &r);
    free(body);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);

    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM payments WHERE event_id = 'evt-idle-retry-1' "
                    "AND status = 'settled' AND attempts = 2",
                    1, SETTLE_MS, 100);
    CHECK_INT(tproc_log_count(worker.proc, "event=retry_publish_failed"), 0);
    CHECK_INT(tproc_log_count(worker.proc, "event=mq_publish_failed"), 0);
    CHECK_INT(tproc_log_count(worker.proc, "event=payment_retrying"), 1);
    CHECK(tprog_metric(&worker, "paygw_amqp_connects_total") == connects);
    CHECK(tprog_metric(&relay, "paygw_amqp_connects_total") == relay_connects);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_delivered_total"), 2);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_settled_total"), 1);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2);
stop:
    tapi_stop(&a);
    tprog_stop(&worker, 10000);
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("worker_idle_retry", &e, run);
}
