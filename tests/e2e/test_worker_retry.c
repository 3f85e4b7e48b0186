/*
 * tests/e2e/test_worker_retry.c - a bank down for two attempts: settled on the third
 *
 * payments-api, payments-relay and payments-worker with
 * BANK_SIM_RULES=001/9999-1:fail-first=2 and RETRY_DELAYS_MS=1000,5000. A
 * payment to 001/9999-1 is `retrying` with attempts 1, then 2 (each with a
 * last_error), then `settled` with attempts 3 about 6 s after the accept
 * (5 s <= elapsed <= 15 s), with one ledger effect and every queue empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"

#define SETTLE_MS 20000

static te2e e;

static void run(void)
{
    const char *rules[] = {"BANK_SIM_RULES=001/9999-1:fail-first=2", "RETRY_DELAYS_MS=1000,5000",
                           NULL};
    char amqp_env[600];
    const char *api_extra[] = {amqp_env, NULL};
    tprog relay = {0}, worker = {0};
    tapi a = {0};
    bool seen1 = false, seen2 = false, settled = false, regressed = false;
    int last_attempts = 0;
    long long t0, deadline;
    double elapsed = 0;
    thttp_resp r;
    json_t *o;
    char *body, *s;
    tmq *m;

    snprintf(amqp_env, sizeof amqp_env, "AMQP_URL=%s", e.amqp_url);
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "worker_retry-relay", &e, rules)) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "worker_retry-worker", &e, rules)) ||
        !CHECK(tapi_start(&a, "worker_retry-api", tdb_url(e.db), api_extra)))
        goto stop;

    s = tapi_payment("evt-retry-1", "pay-retry-1");
    o = json_loads(s, 0, NULL);
    free(s);
    json_object_set_new(json_object_get(o, "payee"), "account", json_string("9999-1"));
    body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    t0 = tproc_now_ms();
    tapi_post(&a, body, NULL, &r);
    free(body);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);

    /* watch the row: retrying/1, retrying/2, settled/3, never backwards */
    deadline = t0 + SETTLE_MS;
    while (!settled && tproc_now_ms() < deadline) {
        char *status =
            tdb_value(e.db, "SELECT status FROM payments WHERE event_id = 'evt-retry-1'", NULL);
        long long attempts =
            tdb_long(e.db, "SELECT attempts FROM payments WHERE event_id = 'evt-retry-1'", NULL);

        if (status != NULL && strcmp(status, "retrying") == 0) {
            if (attempts == 1 && !seen1) {
                seen1 = true;
                printf("retrying, attempts 1, at %.2f s\n", te2e_elapsed_s(t0));
            }
            if (attempts == 2 && !seen2) {
                seen2 = true;
                printf("retrying, attempts 2, at %.2f s\n", te2e_elapsed_s(t0));
            }
        }
        if (attempts >= 0 && attempts < last_attempts)
            regressed = true;
        if (attempts > last_attempts)
            last_attempts = (int)attempts;
        if (status != NULL && strcmp(status, "settled") == 0) {
            settled = true;
            elapsed = te2e_elapsed_s(t0);
            printf("settled at %.2f s after the accept\n", elapsed);
        }
        free(status);
        tproc_sleep_ms(20);
    }
    CHECK(seen1);
    CHECK(seen2);
    CHECK(settled);
    CHECK(!regressed);
    CHECK(elapsed >= 5.0 && elapsed <= 15.0);

    tapi_get(&a, "/v1/payments/pay-retry-1", &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(thttp_json_str(&r, "status"), "settled");
    CHECK_INT(json_integer_value(json_object_get(r.json, "attempts")), 3);
    CHECK(json_is_null(json_object_get(r.json, "last_error")));
    thttp_resp_free(&r);
    CHECK_INT(tdb_long(e.db,
                       "SELECT ((extract(epoch FROM settled_at - created_at) * 1000)::bigint "
                       "BETWEEN 5000 AND 15000)::int FROM payments WHERE event_id = 'evt-retry-1'",
                       NULL),
              1);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2);
    CHECK_INT(tdb_long(e.db, "SELECT attempt FROM inbox WHERE event_id = 'evt-retry-1'", NULL), 3);

    CHECK_INT(tprog_metric(&worker, "paygw_worker_retried_total{delay_ms=\"1000\"}"), 1);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_retried_total{delay_ms=\"5000\"}"), 1);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_settled_total"), 1);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_delivered_total"), 3);
    CHECK_INT(tproc_log_count(worker.proc, "event=payment_retrying"), 2);

    m = tmq_connect(e.amqp_url);
    if (CHECK(m != NULL)) {
        CHECK_INT(tmq_depth(m, "payments.settlement"), 0);
        CHECK_INT(tmq_depth(m, "payments.retry.1000"), 0);
        CHECK_INT(tmq_depth(m, "payments.retry.5000"), 0);
        CHECK_INT(tmq_depth(m, "payments.settlement.dlq"), 0);
        tmq_close(m);
    }
stop:
    tapi_stop(&a);
    tprog_stop(&worker, 10000);
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("worker_retry", &e, run);
}
