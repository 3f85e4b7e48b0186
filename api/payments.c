/* api/payments.c - the accept path: validate, one transaction, then 202 */
#include "api/payments.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "api/committer.h"
#include "api/problem.h"
#include "shared/failpoint.h"
#include "shared/lib/canon.h"
#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"
#include "shared/payment.h"
#include "shared/pg/pg_json.h"

#define POOL_WAIT_MS 2000

const db_stmt payments_stmts[] = {
    {"get_payment",
     "SELECT payment_id, event_id, method, decision, amount_cents, currency, payee_bank, "
     "payee_account, status, attempts, last_error, " PG_JSON_TIME("created_at") ", " PG_JSON_TIME(
         "updated_at") ", " PG_JSON_TIME("settled_at") ", "
                                                       "bank_reference FROM payments WHERE "
                                                       "payment_id = $1"},
};
const size_t payments_nstmts = sizeof payments_stmts / sizeof payments_stmts[0];

static const char *const retry_db[] = {"Retry-After", "1", NULL};
static const char *const retry_backlog[] = {"Retry-After", "5", NULL};

/* W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>; anything else is dropped, not refused. */
static bool traceparent_valid(const char *s)
{
    static const int dashes[] = {2, 35, 52};

    if (s == NULL || strlen(s) != 55)
        return false;
    for (int i = 0; i < 55; i++) {
        bool dash = i == dashes[0] || i == dashes[1] || i == dashes[2];
        bool hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
        if (dash ? s[i] != '-' : !hex)
            return false;
    }
    return true;
}

static void unavailable(const payments_deps *d, http_request *r, const char *detail)
{
    problem_reply_unavailable(r, d->metrics, detail);
}

static void reply_202(http_request *r, const char *payment_id, const char *body, bool replay)
{
    char location[96];
    const char *headers[] = {"Location", location, "Idempotent-Replayed", "true", NULL};

    snprintf(location, sizeof location, "/v1/payments/%s", payment_id);
    if (!replay)
        headers[2] = NULL;
    http_reply(r, 202, "application/json", body, strlen(body), headers);
}

/* Everything up to the database: parse, validate, the header rules. */
static bool accept_validate(const payments_deps *d, http_request *r, json_t **root, payment *p)
{
    char why[200];
    size_t len;
    const char *body = http_request_body(r, &len);
    const char *key;
    field_errors errs;

    if (http_request_body_too_large(r)) {
        problem_reply(r, d->metrics, 413, "payload-too-large", "Payload Too Large",
                      "the body is over 64 KiB", NULL, NULL);
        return false;
    }
    if (json_strict_parse(body, len, JSON_STRICT_MAX_DEPTH, root, why, sizeof why) != GW_OK) {
        problem_reply(r, d->metrics, 400, "malformed-request", "Malformed Request", why, NULL,
                      NULL);
        return false;
    }
    if (!json_is_object(*root)) {
        problem_reply(r, d->metrics, 400, "malformed-request", "Malformed Request",
                      "the body must be a JSON object", NULL, NULL);
        return false;
    }
    if (payment_validate(*root, p, &errs) == GW_OK)
        errs.n = 0;
    key = http_request_header(r, "Idempotency-Key");
    if (key != NULL && p->event_id[0] != '\0' && strcmp(key, p->event_id) != 0 &&
        errs.n < PAYMENT_MAX_ERRORS) {
        snprintf(errs.e[errs.n].pointer, sizeof errs.e[0].pointer, "/event_id");
        snprintf(errs.e[errs.n].detail, sizeof errs.e[0].detail,
                 "must equal the Idempotency-Key header");
        errs.n++;
    }
    if (errs.n > 0) {
        problem_reply(r, d->metrics, 422, "validation-failed", "Validation Failed",
                      "the payment decision breaks the rules listed in errors", &errs, NULL);
        return false;
    }
    return true;
}

/* The state of one accept across its suspension; freed when the request ends. */
typedef struct accept_state {
    accept_job job;
    json_t *root;
    char *canon;
    char trace[56];
    http_request *r; /* borrowed: the request outlives its state */
} accept_state;

static void accept_state_free(void *arg)
{
    accept_state *st = arg;

    json_decref(st->root);
    free(st->canon);
    free(st);
}

static void accept_done(void *arg)
{
    accept_state *st = arg;
    const payment *p = &st->job.p;

    /* on the committer's thread, which holds its batch's lines for one write (api/committer.c) */
    if (st->job.err == GW_OK && st->job.outcome == OUTCOME_ACCEPTED)
        log_info("payment_accepted",
                 "request_id=%s event_id=%s payment_id=%s method=%s decision=%s "
                 "amount_cents=%" PRId64,
                 http_request_id(st->r), p->event_id, p->payment_id, p->method, p->decision,
                 p->amount_cents);
    http_request_resume(st->r); /* the handler runs again and answers */
}

/* First call: validate, then hand the job to the committer and suspend. */
static void accept_submit(const payments_deps *d, http_request *r)
{
    const char *trace = http_request_header(r, "traceparent");
    accept_state *st = calloc(1, sizeof *st);

    if (st == NULL) {
        problem_reply(r, d->metrics, 500, "internal-error", "Internal Error", "out of memory", NULL,
                      NULL);
        return;
    }
    if (!accept_validate(d, r, &st->root, &st->job.p)) {
        accept_state_free(st);
        return;
    }
    if (outbox_watch_over_limit(d->watch)) {
        metrics_add(d->metrics->backpressure, 1);
        problem_reply(r, d->metrics, 503, "outbox-backlog", "Service Unavailable",
                      "the relay is behind: too many payments wait to be published; retry later",
                      NULL, retry_backlog);
        accept_state_free(st);
        return;
    }
    st->canon = canon_dump(st->root);
    json_decref(st->root); /* everything needed is in the payment and the canonical text */
    st->root = NULL;
    if (st->canon == NULL) {
        problem_reply(r, d->metrics, 500, "internal-error", "Internal Error", "out of memory", NULL,
                      NULL);
        accept_state_free(st);
        return;
    }
    if (traceparent_valid(trace)) {
        snprintf(st->trace, sizeof st->trace, "%s", trace);
        st->job.traceparent = st->trace;
    }
    /* both ids are [A-Za-z0-9._:-]: nothing to escape */
    snprintf(st->job.response, sizeof st->job.response,
             "{\"event_id\":\"%s\",\"payment_id\":\"%s\",\"status\":\"accepted\"}",
             st->job.p.event_id, st->job.p.payment_id);
    st->job.canon = st->canon;
    st->job.done = accept_done;
    st->job.arg = st;
    st->r = r;
    http_request_set_state(r, st, accept_state_free);
    http_request_suspend(r);
    committer_submit(d->committer, &st->job);
}

/* Second call, after the committer's COMMIT (or failure): answer. */
static void accept_answer(const payments_deps *d, http_request *r, const accept_job *job)
{
    const payment *p = &job->p;

    if (job->err == GW_ERR_CONFLICT) {
        /* it ran alone and broke a unique key that committed rows hold: a retry fails
         * the same way, so the answer is final (decision 13); the log names the key */
        log_warn("accept_conflict", "request_id=%s event_id=%s payment_id=%s", http_request_id(r),
                 p->event_id, p->payment_id);
        problem_reply(r, d->metrics, 409, "record-conflict", "Record Conflict",
                      "this request conflicts with a stored record; retrying will not change "
                      "the answer",
                      NULL, NULL);
        return;
    }
    if (job->err != GW_OK) {
        /* no COMMIT happened (or its outcome is unknown): never 202 */
        log_warn("accept_failed", "request_id=%s event_id=%s payment_id=%s error=%s",
                 http_request_id(r), p->event_id, p->payment_id, gw_err_str(job->err));
        unavailable(d, r, "the payment could not be committed; retry with the same event_id");
        return;
    }
    switch (job->outcome) {
    case OUTCOME_ACCEPTED:
        if (failpoint_hit("api.after_commit") != GW_OK)
            log_warn("failpoint_ignored", "point=api.after_commit");
        metrics_add(d->metrics->accepted, 1);
        metrics_observe(d->metrics->accept_seconds, http_request_age(r));
        reply_202(r, p->payment_id, job->answer, false); /* logged by accept_done() */
        break;
    case OUTCOME_REPLAY:
        metrics_add(d->metrics->replayed, 1);
        log_info("payment_replayed", "request_id=%s event_id=%s payment_id=%s", http_request_id(r),
                 p->event_id, p->payment_id);
        reply_202(r, p->payment_id, job->answer, true);
        break;
    case OUTCOME_KEY_REUSED:
        problem_reply(r, d->metrics, 422, "idempotency-key-reused", "Idempotency Key Reused",
                      "this event_id was accepted with other content", NULL, NULL);
        break;
    case OUTCOME_IN_FLIGHT:
        problem_reply(r, d->metrics, 409, "request-in-flight", "Request In Flight",
                      "a request with this event_id is being processed; retry shortly", NULL,
                      retry_db);
        break;
    case OUTCOME_PAYMENT_DECIDED:
        problem_reply(r, d->metrics, 409, "payment-already-decided", "Payment Already Decided",
                      "this payment_id already has a decision from another event_id", NULL, NULL);
        break;
    }
}

void payments_accept(const payments_deps *d, http_request *r)
{
    accept_state *st = http_request_state(r);

    if (st == NULL)
        accept_submit(d, r);
    else
        accept_answer(d, r, &st->job);
}

static json_t *payment_row_json(PGresult *res)
{
    json_t *o = json_object();
    json_t *payee = json_object();

    json_object_set_new(o, "payment_id", json_string(PQgetvalue(res, 0, 0))); /* steals */
    json_object_set_new(o, "event_id", json_string(PQgetvalue(res, 0, 1)));
    json_object_set_new(o, "method", json_string(PQgetvalue(res, 0, 2)));
    json_object_set_new(o, "decision", json_string(PQgetvalue(res, 0, 3)));
    json_object_set_new(o, "amount_cents", json_integer(strtoll(PQgetvalue(res, 0, 4), NULL, 10)));
    json_object_set_new(o, "currency", json_string(PQgetvalue(res, 0, 5)));
    json_object_set_new(payee, "bank", json_string(PQgetvalue(res, 0, 6)));
    json_object_set_new(payee, "account", json_string(PQgetvalue(res, 0, 7)));
    json_object_set_new(o, "payee", payee);
    json_object_set_new(o, "status", json_string(PQgetvalue(res, 0, 8)));
    json_object_set_new(o, "attempts", json_integer(atoi(PQgetvalue(res, 0, 9))));
    json_object_set_new(o, "last_error", pg_json_text(res, 0, 10));
    json_object_set_new(o, "created_at", pg_json_text(res, 0, 11));
    json_object_set_new(o, "updated_at", pg_json_text(res, 0, 12));
    json_object_set_new(o, "settled_at", pg_json_text(res, 0, 13));
    /* the HTTP bank's reference (contract section 12): null until settled through it */
    json_object_set_new(o, "bank_reference", pg_json_text(res, 0, 14));
    return o;
}

void payments_get(const payments_deps *d, http_request *r, const char *payment_id)
{
    const char *params[1] = {payment_id};
    PGresult *res = NULL;
    db_conn *db = NULL;
    gw_err err;

    if (!payment_id_valid(payment_id, strlen(payment_id))) {
        problem_reply(r, d->metrics, 404, "not-found", "Not Found", "no such payment", NULL, NULL);
        return;
    }
    err = db_pool_acquire(d->pool, POOL_WAIT_MS, &db);
    if (err != GW_OK) {
        unavailable(d, r, "the database is unavailable");
        return;
    }
    res = db_prepared(db, "get_payment", 1, params);
    err = db_check(res, PGRES_TUPLES_OK, "get_payment");
    if (err != GW_OK && PQstatus(db_pg(db)) != CONNECTION_OK && db_ensure(db) == GW_OK) {
        PQclear(res); /* the connection died while idle: a read is safe to send again */
        res = db_prepared(db, "get_payment", 1, params);
        err = db_check(res, PGRES_TUPLES_OK, "get_payment");
    }
    db_pool_release(d->pool, db);
    if (err != GW_OK)
        unavailable(d, r, "the database is unavailable");
    else if (PQntuples(res) == 0)
        problem_reply(r, d->metrics, 404, "not-found", "Not Found", "no such payment", NULL, NULL);
    else
        http_reply_json(r, 200, payment_row_json(res), NULL);
    PQclear(res);
}
