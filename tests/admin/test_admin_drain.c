/*
 * tests/admin/test_admin_drain.c - POST /admin/dlq/drain against openapi/payments.yaml and
 * docs/architecture.md, "The flow"
 *
 * payments-api, -relay and -worker on a database and a vhost of their own; the
 * worker has bank 237 down (BANK_SIM_RULES=237/ *:down) and RETRY_DELAYS_MS=200,400.
 * Two payments dead-letter: a PIX of R$ 0 (permanent, attempt 1) and a TED to
 * bank 237 (retries exhausted, attempt 3). The drain stores and returns both
 * with their x-death, the DLQ is empty afterwards and a second drain takes
 * nothing. Poison follows: a message that is not JSON (dead-lettered by the
 * worker) and a bare binary message published straight into the DLQ (no
 * properties, no x-death): drained with body_base64 and no body, one per call
 * with max=1. Then the query and token rules: max outside 1..1000 or not a
 * number is 422 (and takes nothing), no token or the API token is 401.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"

#define WAIT_MS 30000

static te2e t;
static tapi api;
static tprog relay, worker;

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The entry of @letter's x_death for @queue, or NULL. */
static json_t *death_in(const json_t *letter, const char *queue)
{
    size_t i;
    json_t *d;

    json_array_foreach(json_object_get(letter, "x_death"), i, d)
    {
        const char *q = jstr(d, "queue");
        if (q != NULL && strcmp(q, queue) == 0)
            return d;
    }
    return NULL;
}

/* Every x_death entry has the contract's six members with sane values. */
static void check_x_death_shape(const json_t *letter)
{
    const json_t *xd = json_object_get(letter, "x_death");
    size_t i, k;
    json_t *d, *rk;

    if (!CHECK(json_is_array(xd)))
        return;
    json_array_foreach(xd, i, d)
    {
        tcheck_context("x_death[%zu] = %s", i, tadm_dump(d));
        CHECK(json_is_object(d));
        CHECK(jstr(d, "queue") != NULL && *jstr(d, "queue") != '\0');
        CHECK(jstr(d, "reason") != NULL);
        CHECK(json_is_integer(json_object_get(d, "count")) &&
              json_integer_value(json_object_get(d, "count")) >= 1);
        CHECK(json_is_string(json_object_get(d, "exchange"))); /* "" for the default exchange */
        CHECK(json_is_array(json_object_get(d, "routing_keys")) &&
              json_array_size(json_object_get(d, "routing_keys")) >= 1);
        json_array_foreach(json_object_get(d, "routing_keys"), k, rk)
        {
            CHECK(json_is_string(rk));
        }
        CHECK(tadm_is_date_time(jstr(d, "time")));
        CHECK_INT(json_object_size(d), 6);
    }
    tcheck_context_clear();
}

/* The members every drained letter has, whatever its message was. */
static void check_common(const json_t *l)
{
    const char *drained_at = jstr(l, "drained_at");

    CHECK(tadm_id(l) >= 1);
    CHECK(json_object_get(l, "event_id") != NULL);
    CHECK(json_object_get(l, "payment_id") != NULL);
    CHECK(json_object_get(l, "routing_key") != NULL);
    CHECK(json_object_get(l, "attempt") != NULL);
    CHECK(json_object_get(l, "last_error") != NULL);
    CHECK(json_object_get(l, "first_death_reason") != NULL);
    CHECK(tadm_is_date_time(drained_at));
    CHECK(json_is_null(json_object_get(l, "replayed_at")));
    /* exactly one of body and body_base64 */
    CHECK((json_object_get(l, "body") != NULL) != (json_object_get(l, "body_base64") != NULL));
    check_x_death_shape(l);
}

/* A letter of a payment: its body is the accepted JSON, its newest death the settlement queue's. */
static void check_payment_letter(const json_t *l, const char *event_id, const char *payment_id,
                                 const char *routing_key, long long attempt, const char *error,
                                 const char *first_reason, const char *posted)
{
    json_t *want = json_loads(posted, 0, NULL);
    json_t *d;

    tcheck_context("letter of %s: %s", event_id, tadm_dump(l));
    if (!CHECK(l != NULL)) {
        json_decref(want);
        tcheck_context_clear();
        return;
    }
    check_common(l);
    tcheck_context("letter of %s: %s", event_id, tadm_dump(l));
    CHECK_STR(jstr(l, "event_id"), event_id);
    CHECK_STR(jstr(l, "payment_id"), payment_id);
    CHECK_STR(jstr(l, "routing_key"), routing_key);
    CHECK(json_is_integer(json_object_get(l, "attempt")));
    CHECK_INT(json_integer_value(json_object_get(l, "attempt")), attempt);
    CHECK_CONTAINS(jstr(l, "last_error"), error);
    CHECK(json_is_object(json_object_get(l, "body")));
    CHECK(json_object_get(l, "body_base64") == NULL);
    CHECK(json_equal(json_object_get(l, "body"), want));
    CHECK_STR(jstr(l, "first_death_reason"), first_reason);
    /* newest first: the settlement queue rejected it last */
    d = json_array_get(json_object_get(l, "x_death"), 0);
    CHECK_STR(jstr(d, "queue"), TADM_SETTLEMENT);
    d = death_in(l, TADM_SETTLEMENT);
    if (CHECK(d != NULL)) {
        CHECK_STR(jstr(d, "reason"), "rejected");
        CHECK(json_integer_value(json_object_get(d, "count")) >= 1);
    }
    json_decref(want);
    tcheck_context_clear();
}

static void auth_and_query_rules(void)
{
    static const char *const bad_max[] = {"0", "1001", "abc", "-1", "1.5", "10x", "", NULL};
    char path[64];
    thttp_resp r;

    /* nothing is in the DLQ now: whatever these calls do, they cannot hide a lost message */
    for (const char *const *m = bad_max; *m != NULL; m++) {
        snprintf(path, sizeof path, "/admin/dlq/drain?max=%s", *m);
        tadm_admin(&api, "POST", path, &r);
        tcheck_context("POST %s", path);
        if (CHECK_PROBLEM(&r, 422, "validation-failed")) {
            json_t *e = json_array_get(json_object_get(r.json, "errors"), 0);
            CHECK_STR(jstr(e, "pointer"), "/max");
        }
        thttp_resp_free(&r);
    }
    tcheck_context_clear();

    CHECK_UNAUTHORIZED(&api, "POST", "/admin/dlq/drain", NULL, true);
    CHECK_UNAUTHORIZED(&api, "POST", "/admin/dlq/drain", TAPI_TOKEN, true);
    CHECK_UNAUTHORIZED(&api, "POST", "/admin/dlq/drain", "not-the-admin-token-at-all", false);
    /* the admin token does not open the payments API */
    CHECK_UNAUTHORIZED(&api, "GET", "/v1/payments/pay-zero", TAPI_ADMIN_TOKEN, false);
    /* the drain takes POST only */
    tadm_admin(&api, "GET", "/admin/dlq/drain", &r);
    CHECK_PROBLEM(&r, 405, "method-not-allowed");
    CHECK_STR(thttp_header(&r, "Allow"), "POST");
    thttp_resp_free(&r);
}

static void drain_payments(void)
{
    char *zero = NULL, *down = NULL, *s;
    thttp_resp r;
    json_t *msgs;
    long long t0;

    /* an empty DLQ drains to nothing */
    if (tadm_drain(&api, 0, &r)) {
        CHECK_INT(json_integer_value(json_object_get(r.json, "drained")), 0);
        CHECK_INT(json_array_size(json_object_get(r.json, "messages")), 0);
    }
    thttp_resp_free(&r);

    t0 = tproc_now_ms();
    if (!tadm_accept(&api, "evt-zero", "pay-zero", "pix", "approved", 0, "001", "1234-5", &zero) ||
        !tadm_accept(&api, "evt-down", "pay-down", "ted", "approved", 4321, "237", "5555-0", &down))
        goto out;
    CHECK_WAIT_LONG(t.db, "SELECT count(*) FROM payments WHERE status = 'dead_lettered'", 2,
                    WAIT_MS, 25);
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 2, WAIT_MS), 2);
    printf("both payments in the DLQ %.2f s after the accepts\n",
           (double)(tproc_now_ms() - t0) / 1000.0);

    if (!tadm_drain(&api, 10, &r)) {
        thttp_resp_free(&r);
        goto out;
    }
    CHECK_INT(json_integer_value(json_object_get(r.json, "drained")), 2);
    msgs = json_object_get(r.json, "messages");
    CHECK_INT(json_array_size(msgs), 2);
    check_payment_letter(tadm_letter_for(msgs, "evt-zero"), "evt-zero", "pay-zero",
                         "payment.pix.approved", 1, "amount is zero", "rejected", zero);
    /* the last copy of an exhausted retry first died of TTL in its delay queue */
    check_payment_letter(tadm_letter_for(msgs, "evt-down"), "evt-down", "pay-down",
                         "payment.ted.approved", 3, "retries exhausted", "expired", down);
    {
        json_t *l = tadm_letter_for(msgs, "evt-down");
        json_t *d = death_in(l, "payments.retry.400");

        tcheck_context("letter of evt-down: %s", tadm_dump(l));
        if (CHECK(d != NULL))
            CHECK_STR(jstr(d, "reason"), "expired");
        tcheck_context_clear();
    }
    thttp_resp_free(&r);

    /* stored, acked, and the payments keep their status */
    CHECK_INT(tdb_long(t.db, "SELECT count(*) FROM dead_letters", NULL), 2);
    CHECK_INT(tadm_depth(&t, TADM_DLQ), 0);
    s = tadm_status(t.db, "pay-zero");
    CHECK_STR(s, "dead_lettered");
    free(s);
    s = tadm_status(t.db, "pay-down");
    CHECK_STR(s, "dead_lettered");
    free(s);
    if (tadm_drain(&api, 10, &r)) {
        CHECK_INT(json_integer_value(json_object_get(r.json, "drained")), 0);
        CHECK_INT(json_array_size(json_object_get(r.json, "messages")), 0);
    }
    thttp_resp_free(&r);
    CHECK_INT(tdb_long(t.db, "SELECT count(*) FROM dead_letters", NULL), 2);
out:
    free(zero);
    free(down);
}

static void drain_poison(void)
{
    static const char text[] = "this is not JSON {\"event_id\": \"poison-1\"";
    static const char binary[] = {'\0', '\x01', '\xff', 'b', 'i', 'n', '\n', '\0', '\x7f'};
    tmq_pub via_worker = {
        .exchange = TADM_EVENTS,
        .routing_key = "payment.pix.approved",
        .body = text,
        .len = sizeof text - 1,
        .message_id = "poison-1",
        .attempt = 1,
        .mandatory = true,
        .bare = true,
        .content_type = "application/json",
    };
    tmq_pub straight = {
        .exchange = "",
        .routing_key = TADM_DLQ,
        .body = binary,
        .len = sizeof binary,
        .mandatory = true,
        .bare = true,
    };
    char *b64_text = tadm_base64(text, sizeof text - 1);
    char *b64_bin = tadm_base64(binary, sizeof binary);
    json_t *l, *seen = json_array();
    thttp_resp r;

    CHECK(tadm_publish(&t, &via_worker));
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, WAIT_MS), 1); /* the worker dead-lettered it */
    CHECK(tadm_publish(&t, &straight));
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 2, WAIT_MS), 2);

    /* max=1: one per call, the other stays in the DLQ */
    for (int call = 1; call <= 2; call++) {
        if (tadm_drain(&api, 1, &r)) {
            CHECK_INT(json_integer_value(json_object_get(r.json, "drained")), 1);
            CHECK_INT(json_array_size(json_object_get(r.json, "messages")), 1);
            json_array_extend(seen, json_object_get(r.json, "messages"));
        }
        thttp_resp_free(&r);
        CHECK_INT(tadm_depth(&t, TADM_DLQ), 2 - call);
    }

    l = tadm_letter_for(seen, "poison-1");
    tcheck_context("poison letter: %s", tadm_dump(l));
    if (CHECK(l != NULL)) {
        json_t *d;

        check_common(l);
        tcheck_context("poison letter: %s", tadm_dump(l));
        CHECK(json_object_get(l, "body") == NULL);
        CHECK_STR(jstr(l, "body_base64"), b64_text);
        CHECK(json_is_null(json_object_get(l, "payment_id")));
        CHECK_STR(jstr(l, "routing_key"), "payment.pix.approved");
        CHECK_INT(json_integer_value(json_object_get(l, "attempt")), 1);
        CHECK_STR(jstr(l, "first_death_reason"), "rejected");
        d = death_in(l, TADM_SETTLEMENT);
        if (CHECK(d != NULL)) {
            CHECK_STR(jstr(d, "reason"), "rejected");
            CHECK_STR(jstr(d, "exchange"), TADM_EVENTS);
        }
    }
    /* the bare one: no message_id, no headers, no x-death, not UTF-8 */
    l = NULL;
    for (size_t i = 0; i < json_array_size(seen); i++)
        if (json_is_null(json_object_get(json_array_get(seen, i), "event_id")))
            l = json_array_get(seen, i);
    tcheck_context("bare letter: %s", tadm_dump(l));
    if (CHECK(l != NULL)) {
        check_common(l);
        tcheck_context("bare letter: %s", tadm_dump(l));
        CHECK(json_object_get(l, "body") == NULL);
        CHECK_STR(jstr(l, "body_base64"), b64_bin);
        CHECK(json_is_null(json_object_get(l, "payment_id")));
        CHECK(json_is_null(json_object_get(l, "attempt")));
        CHECK(json_is_null(json_object_get(l, "last_error")));
        CHECK(json_is_null(json_object_get(l, "first_death_reason")));
        CHECK_INT(json_array_size(json_object_get(l, "x_death")), 0);
        CHECK_STR(jstr(l, "routing_key"), TADM_DLQ);
    }
    tcheck_context_clear();
    CHECK_INT(tdb_long(t.db, "SELECT count(*) FROM dead_letters", NULL), 4);
    CHECK_INT(tdb_long(t.db,
                       "SELECT count(*) FROM dead_letters WHERE NOT body_is_json "
                       "AND body = decode($1, 'base64')",
                       b64_bin, NULL),
              1);
    json_decref(seen);
    free(b64_text);
    free(b64_bin);
}

static void tests(void)
{
    TRUN(auth_and_query_rules);
    TRUN(drain_payments);
    TRUN(drain_poison);
}

int main(void)
{
    static const char *const worker_env[] = {TADM_BANK_237_DOWN, NULL};

    return tadm_main("admin_drain", &t, &relay, &worker, &api, worker_env, tests);
}
