/*
 * tests/integration/test_event_after_expiry.c - an event_id whose idempotency
 * record has expired still gets a definite answer
 *
 * Since sql/0018 an accept writes no record beside the payment row: the row is the record.
 * The records an older build wrote are made here in SQL, then expired in SQL and removed by
 * payments-api's own purge (api/key_expiry.c, on the watcher thread, once a minute). Then the
 * same event_id must be
 * a replay when the content is the same (202, Idempotent-Replayed, the body
 * rebuilt from the payment row) and 422 idempotency-key-reused when it is not;
 * never a 503 that the client would retry forever. A unique violation that no
 * retry can cure gets a definite 409 as well (decision 13).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"

/* One purge a minute (api/key_expiry.c), plus room for a slow tree. */
#define PURGE_WAIT_MS 80000

static tdb *db;
static tapi api;

/* The first 202 body of each event, as the client saw it. */
static char first_a[256], first_d[256];

/* tapi_payment() with @member set to @value (stolen; NULL removes the member). */
static char *payment_with(const char *event_id, const char *payment_id, const char *member,
                          json_t *value)
{
    char *base = tapi_payment(event_id, payment_id);
    json_t *o = json_loads(base, 0, NULL);
    char *s;

    if (value != NULL)
        json_object_set_new(o, member, value);
    else
        json_object_del(o, member);
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    free(base);
    return s;
}

static long post(const char *body, thttp_resp *out)
{
    tapi_post(&api, body, NULL, out);
    return out->status;
}

/* expect_key_reused - POST @body: a 422 problem "idempotency-key-reused". */
static void expect_key_reused_at(int line, const char *body)
{
    thttp_resp r;

    post(body, &r);
    tapi_check_problem_at(__FILE__, line, &r, 422, "idempotency-key-reused");
    thttp_resp_free(&r);
}
#define expect_key_reused(body) expect_key_reused_at(__LINE__, (body))

static long post_std(const char *event_id, const char *payment_id, thttp_resp *out)
{
    char *body = tapi_payment(event_id, payment_id);
    long status = post(body, out);

    free(body);
    return status;
}

static long long rows_for(const char *table, const char *event_id)
{
    char sql[128];

    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE event_id = $1", table);
    return tdb_long(db, sql, event_id, NULL);
}

/* A replay: 202, the replay header, Location, and the body of the first answer. */
static void check_replay_at(int line, const thttp_resp *r, const char *payment_id,
                            const char *first)
{
    char location[96];

    tcheck_context("line %d: replay of %s", line, payment_id);
    snprintf(location, sizeof location, "/v1/payments/%s", payment_id);
    if (!CHECK_INT(r->status, 202))
        fprintf(stderr, "    body: %s\n", r->body);
    CHECK_STR(thttp_header(r, "Idempotent-Replayed"), "true");
    CHECK_STR(thttp_header(r, "Location"), location);
    CHECK_STR(r->body, first);
    tcheck_context_clear();
}
#define check_replay(r, p, first) check_replay_at(__LINE__, (r), (p), (first))

static void test_accept_then_expire(void)
{
    static const char *const events[][2] = {{"evt-a", "pay-a"},
                                            {"evt-b", "pay-b"},
                                            {"evt-c", "pay-c"},
                                            {"evt-d", "pay-d"},
                                            {"evt-keep", "pay-keep"}};
    thttp_resp r;

    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        CHECK_INT(post_std(events[i][0], events[i][1], &r), 202);
        if (strcmp(events[i][0], "evt-a") == 0)
            snprintf(first_a, sizeof first_a, "%s", r.body);
        if (strcmp(events[i][0], "evt-d") == 0)
            snprintf(first_d, sizeof first_d, "%s", r.body);
        thttp_resp_free(&r);
    }
    /* the payment row is the record (sql/0018): no idempotency_keys row */
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM idempotency_keys", NULL), 0);
    /* the records a build before sql/0018 wrote beside each payment */
    CHECK(tdb_exec(db,
                   "INSERT INTO idempotency_keys (event_id, fingerprint, payment_id, "
                   "response_status, response_body) SELECT event_id, fingerprint, payment_id, "
                   "202, payment_accepted_body(event_id, payment_id) FROM payments",
                   NULL));
    /* evt-d stands for a payment accepted before the payment row kept its fingerprint */
    CHECK(tdb_exec(db, "UPDATE payments SET fingerprint = NULL WHERE event_id = 'evt-d'", NULL));

    /* seven days later, for every record but evt-keep's */
    CHECK(tdb_exec(db,
                   "UPDATE idempotency_keys SET expires_at = now() - interval '1 second' "
                   "WHERE event_id <> 'evt-keep'",
                   NULL));
    if (!CHECK(tproc_wait_log(api.proc, "event=idempotency_keys_expired", PURGE_WAIT_MS)))
        return;
    CHECK(tproc_log_contains(api.proc, "rows=4"));
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM idempotency_keys", NULL), 1);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM payments", NULL), 5);
}

static void test_same_content_is_replay(void)
{
    static const char reordered[] =
        "{ \"payment_id\": \"pay-a\", \"event_id\": \"evt-a\", \"method\": \"pix\",\n"
        "  \"payee\": {\"account\": \"1234-5\", \"bank\": \"001\"}, \"decision\": \"approved\",\n"
        "  \"amount_cents\": 15000, \"currency\": \"BRL\", \"decided_at\": "
        "\"2026-11-29T12:00:00Z\",\n"
        "  \"payer\": {\"document\": \"12345678909\", \"name\": \"Maria Silva\"} }";
    thttp_resp r;

    post_std("evt-a", "pay-a", &r);
    check_replay(&r, "pay-a", first_a);
    thttp_resp_free(&r);
    post(reordered, &r); /* key order and white space do not matter */
    check_replay(&r, "pay-a", first_a);
    thttp_resp_free(&r);
    /* a replay writes nothing, not even a new idempotency record */
    CHECK_INT(rows_for("payments", "evt-a"), 1);
    CHECK_INT(rows_for("outbox", "evt-a"), 1);
    CHECK_INT(rows_for("idempotency_keys", "evt-a"), 0);
}

static void test_other_payment_id_is_key_reused(void)
{
    thttp_resp r;

    /* was 503: the unique key on payments.event_id, "retry with the same event_id" forever */
    for (int i = 0; i < 2; i++) { /* and the answer does not change */
        post_std("evt-b", "pay-b2", &r);
        CHECK_PROBLEM(&r, 422, "idempotency-key-reused");
        CHECK(thttp_header(&r, "Retry-After") == NULL);
        thttp_resp_free(&r);
    }
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM payments WHERE payment_id = 'pay-b2'", NULL), 0);
    CHECK_INT(rows_for("payments", "evt-b"), 1);
}

static void test_other_content_is_key_reused(void)
{
    char *amount = payment_with("evt-c", "pay-c", "amount_cents", json_integer(15001));
    char *no_payer = payment_with("evt-c", "pay-c", "payer", NULL);

    /* was 409 payment-already-decided: the payment is this event's own */
    expect_key_reused(amount);
    /* the payer is not a column, but the fingerprint on the payment row covers it */
    expect_key_reused(no_payer);
    CHECK_INT(tdb_long(db, "SELECT amount_cents FROM payments WHERE event_id = 'evt-c'", NULL),
              15000);
    free(amount);
    free(no_payer);
}

static void test_row_without_fingerprint(void)
{
    char *amount = payment_with("evt-d", "pay-d", "amount_cents", json_integer(15001));
    char *bank = payment_with("evt-d", "pay-d", "payee",
                              json_pack("{s:s,s:s}", "bank", "002", "account", "1234-5"));
    thttp_resp r;

    /* without a fingerprint the columns are compared */
    post_std("evt-d", "pay-d", &r);
    check_replay(&r, "pay-d", first_d);
    thttp_resp_free(&r);
    expect_key_reused(amount);
    expect_key_reused(bank);
    post_std("evt-d", "pay-d2", &r);
    CHECK_PROBLEM(&r, 422, "idempotency-key-reused");
    thttp_resp_free(&r);
    CHECK_INT(rows_for("payments", "evt-d"), 1);
    free(amount);
    free(bank);
}

static void test_unexpired_and_decided_unchanged(void)
{
    thttp_resp r;

    post_std("evt-keep", "pay-keep", &r);
    CHECK_INT(r.status, 202);
    CHECK_STR(thttp_header(&r, "Idempotent-Replayed"), "true");
    thttp_resp_free(&r);
    /* a new event for a payment that has a decision: still 409 */
    post_std("evt-new", "pay-a", &r);
    CHECK_PROBLEM(&r, 409, "payment-already-decided");
    thttp_resp_free(&r);
    CHECK_INT(rows_for("payments", "evt-new"), 0);
    /* and a new event for a new payment is accepted as ever */
    CHECK_INT(post_std("evt-e", "pay-e", &r), 202);
    CHECK(thttp_header(&r, "Idempotent-Replayed") == NULL);
    thttp_resp_free(&r);
}

static void test_unique_violation_is_definite(void)
{
    thttp_resp r;

    /* an outbox row without its payment: the accept's own checks cannot foresee it, and
     * its INSERT breaks outbox_event_id_key however often the client retries */
    CHECK(tdb_exec(db,
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                   "VALUES ('evt-orphan', 'pay-orphan', 'payment.pix.approved', '{}')",
                   NULL));
    for (int i = 0; i < 2; i++) {
        post_std("evt-orphan", "pay-orphan", &r);
        CHECK_PROBLEM(&r, 409, "record-conflict");
        CHECK(thttp_header(&r, "Retry-After") == NULL);
        thttp_resp_free(&r);
    }
    CHECK_INT(rows_for("payments", "evt-orphan"), 0);
    /* the log names the constraint for the operator */
    CHECK(tproc_log_contains(api.proc, "outbox_event_id_key"));
}

static void tests(void)
{
    TRUN(test_accept_then_expire);
    TRUN(test_same_content_is_replay);
    TRUN(test_other_payment_id_is_key_reused);
    TRUN(test_other_content_is_key_reused);
    TRUN(test_row_without_fingerprint);
    TRUN(test_unexpired_and_decided_unchanged);
    TRUN(test_unique_violation_is_definite);
}

int main(void)
{
    return tapi_main("test_event_after_expiry", &db, &api, "expiry-api", tests);
}
