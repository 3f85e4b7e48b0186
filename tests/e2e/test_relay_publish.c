/*
 * tests/e2e/test_relay_publish.c - accepted through the API, published by the relay
 *
 * Two approved payments (one with a traceparent) and one refused go through
 * payments-api; payments-relay publishes them. The approved ones end
 * `published` and their messages sit in payments.settlement with the
 * properties of docs/architecture.md, "The flow" and the outbox body; the refused one comes
 * back from the broker (mandatory, no binding) and ends `unroutable` with
 * NO_ROUTE in outbox and payments; the relay counts one return.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"

#define TRACEPARENT "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static te2e e;

static char *refused_payment(const char *event_id, const char *payment_id)
{
    char *s = tapi_payment(event_id, payment_id);
    json_t *o = json_loads(s, 0, NULL);

    free(s);
    json_object_set_new(o, "decision", json_string("refused"));
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* post - POST @body (owned: freed here) with @headers and check the 202. */
static void post(const tapi *a, char *body, const char *const *headers)
{
    thttp_resp r;

    tapi_post(a, body, headers, &r);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);
    free(body);
}

/* The message of @event_id in @msgs against the contract and the outbox row. */
static void check_message(const tmq_msg *msgs, size_t n, const char *event_id,
                          const char *traceparent, time_t t0)
{
    const tmq_msg *m = NULL;
    char *body;

    tcheck_context("message %s", event_id);
    for (size_t i = 0; i < n; i++)
        if (msgs[i].message_id != NULL && strcmp(msgs[i].message_id, event_id) == 0)
            m = &msgs[i];
    if (!CHECK(m != NULL))
        return;
    CHECK_INT(m->delivery_mode, 2);
    CHECK_STR(m->content_type, "application/json");
    CHECK_STR(m->type, "payment.decision");
    CHECK_STR(m->exchange, "payments.events");
    CHECK_STR(m->routing_key, "payment.pix.approved");
    CHECK(m->has_timestamp);
    CHECK((time_t)m->timestamp >= t0 - 5 && (time_t)m->timestamp <= time(NULL) + 5);
    CHECK_INT(tmq_header_int(m, "x-attempt"), 1);
    CHECK(json_is_integer(json_object_get(m->headers, "x-attempt")));
    if (traceparent != NULL)
        CHECK_STR(tmq_header_str(m, "traceparent"), traceparent);
    else
        CHECK(json_object_get(m->headers, "traceparent") == NULL);
    CHECK(json_object_get(m->headers, "x-last-error") == NULL);
    body = tdb_value(e.db, "SELECT body FROM outbox WHERE event_id = $1", event_id, NULL);
    CHECK(body != NULL && m->len == strlen(body));
    CHECK_STR(m->body, body);
    free(body);
    tcheck_context_clear();
}

static void run(void)
{
    char amqp_env[600];
    const char *api_extra[] = {amqp_env, NULL};
    const char *trace[] = {"traceparent: " TRACEPARENT, NULL};
    time_t t0 = time(NULL);
    long long t_ms = tproc_now_ms();
    tprog relay;
    tapi a;
    tmq *m;
    tmq_msg *msgs;
    size_t n = 0;
    thttp_resp r;
    char *s;

    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_publish-relay", &e, NULL)))
        return;
    snprintf(amqp_env, sizeof amqp_env, "AMQP_URL=%s", e.amqp_url);
    if (!CHECK(tapi_start(&a, "relay_publish-api", tdb_url(e.db), api_extra))) {
        tprog_stop(&relay, 0);
        return;
    }

    post(&a, tapi_payment("evt-traced", "pay-traced"), trace);
    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM payments WHERE event_id = 'evt-traced' "
                    "AND status = 'published'",
                    1, 15000, 2);
    printf("accept to published: %lld ms\n", tproc_now_ms() - t_ms);
    post(&a, tapi_payment("evt-plain", "pay-plain"), NULL);
    post(&a, refused_payment("evt-refused", "pay-refused"), NULL);

    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM outbox o JOIN payments p USING (payment_id) "
                    "WHERE o.state <> 'pending' AND p.status <> 'accepted'",
                    3, 15000, 20);
    printf("3 accepted payments published or returned in %.2f s\n", te2e_elapsed_s(t_ms));

    /* the approved ones */
    for (int i = 0; i < 2; i++) {
        const char *ev = i == 0 ? "evt-traced" : "evt-plain";
        tcheck_context("%s", ev);
        s = tdb_value(e.db, "SELECT status FROM payments WHERE event_id = $1", ev, NULL);
        CHECK_STR(s, "published");
        free(s);
        s = tdb_value(e.db, "SELECT state FROM outbox WHERE event_id = $1", ev, NULL);
        CHECK_STR(s, "published");
        free(s);
        CHECK_INT(tdb_long(e.db,
                           "SELECT count(*) FROM outbox WHERE event_id = $1 "
                           "AND published_at IS NOT NULL AND last_error IS NULL",
                           ev, NULL),
                  1);
    }
    tcheck_context_clear();
    CHECK_SQL_STR(e.db, "SELECT traceparent FROM outbox WHERE event_id = 'evt-traced'",
                  TRACEPARENT);

    /* the refused one */
    CHECK_SQL_STR(e.db, "SELECT state FROM outbox WHERE event_id = 'evt-refused'", "unroutable");
    CHECK_SQL_CONTAINS(e.db, "SELECT last_error FROM outbox WHERE event_id = 'evt-refused'",
                       "NO_ROUTE");
    CHECK_SQL_STR(e.db, "SELECT status FROM payments WHERE event_id = 'evt-refused'", "unroutable");
    CHECK_SQL_CONTAINS(e.db, "SELECT last_error FROM payments WHERE event_id = 'evt-refused'",
                       "NO_ROUTE");
    tapi_get(&a, "/v1/payments/pay-refused", &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(thttp_json_str(&r, "status"), "unroutable");
    CHECK_CONTAINS(thttp_json_str(&r, "last_error"), "NO_ROUTE");
    thttp_resp_free(&r);

    /* the queue: exactly the two approved messages */
    m = tmq_connect(e.amqp_url);
    if (CHECK(m != NULL)) {
        msgs = tmq_read_all(m, "payments.settlement", true, &n);
        CHECK(msgs != NULL);
        CHECK_INT(n, 2);
        check_message(msgs, n, "evt-traced", TRACEPARENT, t0);
        check_message(msgs, n, "evt-plain", NULL, t0);
        tmq_msgs_free(msgs, n);
        CHECK_INT(tmq_depth(m, "payments.settlement.dlq"), 0);
        tmq_close(m);
    }

    /* the relay's own account */
    CHECK_INT(tprog_metric(&relay, "paygw_relay_returned_total"), 1);
    CHECK_INT(tprog_metric(&relay, "paygw_relay_confirmed_total"), 2);
    CHECK_INT(tprog_metric(&relay, "paygw_relay_published_total"), 3);
    CHECK_INT(tprog_metric(&relay, "paygw_relay_nacked_total"), 0);
    CHECK(tproc_log_contains(relay.proc, "event=payment_unroutable"));

    tapi_stop(&a);
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("relay_publish", &e, run);
}
