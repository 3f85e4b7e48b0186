/*
 * tests/e2e/test_worker_dlq.c - what cannot settle goes to the DLQ, and the queue keeps flowing
 *
 * One payments-worker with every account of bank 237 down (BANK_SIM_RULES with
 * bank 237, any account, "down") and RETRY_DELAYS_MS=300,600 to keep it short.
 * Into the DLQ, each with an x-death naming
 * payments.settlement and reason rejected:
 *   - a payment to bank 237 after its third attempt (retries exhausted);
 *   - an R$ 0 payment at once, on attempt 1 (permanent);
 *   - published straight to payments.settlement: a body that is not JSON, a
 *     JSON object of the wrong shape, a 200 KiB one, and a valid payment
 *     whose message has no message_id (the contract's message_id = event_id
 *     does not hold: it is not a message of this system).
 * A valid payment published after all of them still settles.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define WAIT_MS   30000
#define HUGE_SIZE (200 * 1024)

static te2e e;

static bool publish_raw(tmq *m, const char *message_id, const char *body, size_t len)
{
    tmq_pub p = {
        .exchange = "",
        .routing_key = "payments.settlement",
        .body = body,
        .len = len,
        .message_id = message_id,
        .attempt = 1,
        .mandatory = true,
    };

    return tmq_publish(m, &p) == 1;
}

/* A message of the DLQ by message_id (NULL: the one without); NULL when absent. */
static const tmq_msg *find(const tmq_msg *msgs, size_t n, const char *message_id)
{
    for (size_t i = 0; i < n; i++) {
        if (message_id == NULL
                ? msgs[i].message_id == NULL
                : (msgs[i].message_id != NULL && strcmp(msgs[i].message_id, message_id) == 0))
            return &msgs[i];
    }
    return NULL;
}

/* Dead-lettered by payments.settlement with reason rejected (its newest x-death). */
static void check_dead(const tmq_msg *msgs, size_t n, const char *message_id, long long attempt,
                       const char *routing_key)
{
    const tmq_msg *m = find(msgs, n, message_id);
    json_t *deaths, *d;

    tcheck_context("DLQ message %s", message_id ? message_id : "(without message_id)");
    if (!CHECK(m != NULL)) {
        tcheck_context_clear();
        return;
    }
    deaths = tmq_x_death(m);
    d = json_array_get(deaths, 0);
    CHECK(json_array_size(deaths) >= 1);
    CHECK_STR(json_string_value(json_object_get(d, "queue")), "payments.settlement");
    CHECK_STR(json_string_value(json_object_get(d, "reason")), "rejected");
    CHECK_INT(json_integer_value(json_object_get(d, "count")), 1);
    CHECK_INT(tmq_header_int(m, "x-attempt"), attempt);
    CHECK_STR(m->routing_key, routing_key);
    json_decref(deaths);
    tcheck_context_clear();
}

static char *huge_body(void)
{
    char *pay = te2e_payment_json("evt-huge", "pay-huge", 100, "001", "1234-5");
    size_t plen = strlen(pay);
    char *s = malloc(HUGE_SIZE + 1);

    if (s == NULL)
        abort();
    /* {"padding":"xxxx...", <the payment's members>}: valid JSON, an unknown member */
    memcpy(s, "{\"padding\":\"", 12);
    memset(s + 12, 'x', HUGE_SIZE - 12 - 2 - (plen - 1));
    memcpy(s + HUGE_SIZE - (plen - 1) - 2, "\",", 2);
    memcpy(s + HUGE_SIZE - (plen - 1), pay + 1, plen - 1);
    s[HUGE_SIZE] = '\0';
    free(pay);
    return s;
}

static void run(void)
{
    const char *env[] = {"BANK_SIM_RULES=237/*:down", "RETRY_DELAYS_MS=300,600", NULL};
    char *down = te2e_payment_json("evt-down", "pay-down", 777, "237", "5555-0");
    char *zero = te2e_payment_json("evt-zero", "pay-zero", 0, "001", "1234-5");
    char *noid = te2e_payment_json("evt-noid", "pay-noid", 1234, "001", "1234-5");
    char *flow = te2e_payment_json("evt-flow", "pay-flow", 999, "001", "1234-5");
    char *huge = huge_body();
    tprog worker = {0};
    tmq *m = NULL;
    tmq_msg *msgs = NULL;
    size_t n = 0;
    long long t0;
    const tmq_msg *h;
    json_t *parsed;
    char *s;

    if (!CHECK(te2e_insert_payment(e.db, "evt-down", "pay-down", 777, "237", "5555-0")) ||
        !CHECK(te2e_insert_payment(e.db, "evt-zero", "pay-zero", 0, "001", "1234-5")) ||
        !CHECK(te2e_insert_payment(e.db, "evt-noid", "pay-noid", 1234, "001", "1234-5")) ||
        !CHECK(te2e_insert_payment(e.db, "evt-flow", "pay-flow", 999, "001", "1234-5")) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "worker_dlq-worker", &e, env)))
        goto out;
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL))
        goto out;
    t0 = tproc_now_ms();
    CHECK(te2e_publish_event(m, "evt-down", down));
    CHECK(te2e_publish_event(m, "evt-zero", zero));
    CHECK(publish_raw(m, "bad-json", "{\"event_id\": \"bad-json\", \"payment_id\"", 0));
    CHECK(publish_raw(m, "bad-schema", "{\"hello\":\"world\",\"amount_cents\":1.5}", 0));
    CHECK(publish_raw(m, "bad-huge", huge, HUGE_SIZE));
    CHECK(publish_raw(m, NULL, noid, 0));
    CHECK(te2e_publish_event(m, "evt-flow", flow));

    /* the valid one behind the poison settles */
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM payments WHERE status = 'settled'", 1, WAIT_MS, 20);
    printf("the payment published after the poison settled %.2f s after the first publish\n",
           te2e_elapsed_s(t0));
    s = tdb_value(e.db, "SELECT payment_id FROM payments WHERE status = 'settled'", NULL);
    CHECK_STR(s, "pay-flow");
    free(s);
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM payments WHERE status = 'dead_lettered'", 2,
                    WAIT_MS, 20);
    printf("both payments dead-lettered %.2f s after the first publish\n", te2e_elapsed_s(t0));

    /* the DB side */
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE payment_id = 'pay-zero' "
                       "AND status = 'dead_lettered' AND attempts = 1 "
                       "AND last_error LIKE '%amount is zero%'",
                       NULL),
              1);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE payment_id = 'pay-down' "
                       "AND status = 'dead_lettered' AND attempts = 3 "
                       "AND last_error LIKE '%retries exhausted%'",
                       NULL),
              1);
    s = tdb_value(e.db, "SELECT status FROM payments WHERE payment_id = 'pay-noid'", NULL);
    CHECK_STR(s, "published"); /* no effect from a message without message_id */
    free(s);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), 1);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2);

    /* the DLQ side */
    {
        long long deadline = tproc_now_ms() + 10000;
        long depth;

        while ((depth = tmq_depth(m, "payments.settlement.dlq")) < 6 && tproc_now_ms() < deadline)
            tproc_sleep_ms(50);
        CHECK_INT(depth, 6);
    }
    CHECK_INT(tmq_depth(m, "payments.settlement"), 0);
    CHECK_INT(tmq_depth(m, "payments.retry.300"), 0);
    CHECK_INT(tmq_depth(m, "payments.retry.600"), 0);
    msgs = tmq_read_all(m, "payments.settlement.dlq", true, &n);
    CHECK_INT(n, 6);
    /* a retry copy comes back from its delay queue with routing key payments.settlement */
    check_dead(msgs, n, "evt-down", 3, "payments.settlement");
    check_dead(msgs, n, "evt-zero", 1, "payment.pix.approved");
    check_dead(msgs, n, "bad-json", 1, "payments.settlement");
    check_dead(msgs, n, "bad-schema", 1, "payments.settlement");
    check_dead(msgs, n, "bad-huge", 1, "payments.settlement");
    check_dead(msgs, n, NULL, 1, "payments.settlement");
    h = find(msgs, n, "bad-huge");
    CHECK(h != NULL && h->len == HUGE_SIZE && memcmp(h->body, huge, HUGE_SIZE) == 0);
    parsed = json_loads(huge, 0, NULL);
    CHECK(parsed != NULL); /* the huge one was valid JSON: refused by the schema, not the parser */
    json_decref(parsed);
    h = find(msgs, n, NULL);
    CHECK(h != NULL && strcmp(h->body, noid) == 0);
    h = find(msgs, n, "evt-down");
    CHECK_CONTAINS(h ? tmq_header_str(h, "x-last-error") : NULL, "bank 237 unavailable");

    CHECK_INT(tprog_metric(&worker, "paygw_worker_dead_lettered_total{reason=\"invalid\"}"), 4);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_dead_lettered_total{reason=\"permanent\"}"), 1);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_dead_lettered_total{reason=\"exhausted\"}"), 1);
    CHECK_INT(tprog_metric(&worker, "paygw_worker_settled_total"), 1);
    CHECK(tproc_running(worker.proc));
out:
    tmq_msgs_free(msgs, n);
    tmq_close(m);
    tprog_stop(&worker, 10000);
    free(down);
    free(zero);
    free(noid);
    free(flow);
    free(huge);
}

int main(void)
{
    return te2e_main("worker_dlq", &e, run);
}
