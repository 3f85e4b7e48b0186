/* api/payments.c - the accept path: validate, one transaction, then 202 */
#include "api/payments.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "api/problem.h"
#include "shared/canon.h"
#include "shared/failpoint.h"
#include "shared/json_strict.h"
#include "shared/log.h"
#include "shared/payment.h"

#define POOL_WAIT_MS 2000

const db_stmt payments_stmts[] = {
    {"accept", "SELECT outcome, response_body FROM accept_payment($1, $2, $3, $4, $5::bigint, "
               "$6, $7, $8, $9::timestamptz, $10::bytea, $11, $12, $13)"},
    {"get_payment",
     "SELECT payment_id, event_id, method, decision, amount_cents, currency, payee_bank, "
     "payee_account, status, attempts, last_error, "
     "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
     "to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
     "to_char(settled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') "
     "FROM payments WHERE payment_id = $1"},
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
    problem_reply(r, d->metrics, 503, "service-unavailable", "Service Unavailable", detail, NULL,
                  retry_db);
}

/* A decision about @p that the transaction reached; see accept_payment() in sql/. */
typedef enum accept_outcome {
    OUTCOME_ACCEPTED,
    OUTCOME_REPLAY,
    OUTCOME_KEY_REUSED,
    OUTCOME_IN_FLIGHT,
    OUTCOME_PAYMENT_DECIDED,
} accept_outcome;

static bool outcome_parse(const char *s, accept_outcome *out)
{
    static const char *const names[] = {"accepted", "replay", "key_reused", "in_flight",
                                        "payment_decided"};

    for (int i = 0; i < 5; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (accept_outcome)i;
            return true;
        }
    }
    return false;
}

/*
 * accept_commit - BEGIN, accept_payment(), COMMIT only when rows were written.
 * On GW_OK, *@outcome says what happened and @answer (size @alen) holds the
 * 202 body to send. Any other result means nothing was committed.
 */
static gw_err accept_commit(db_conn *db, const payment *p, const char *canon,
                            const char *traceparent, const char *response, accept_outcome *outcome,
                            char *answer, size_t alen)
{
    uint8_t fp[CANON_FINGERPRINT_LEN];
    char fp_hex[2 + 2 * CANON_FINGERPRINT_LEN + 1] = "\\x";
    char amount[24];
    const char *params[13];
    PGresult *res = NULL;
    gw_err err;

    canon_fingerprint(canon, strlen(canon), fp);
    sodium_bin2hex(fp_hex + 2, sizeof fp_hex - 2, fp, sizeof fp);
    snprintf(amount, sizeof amount, "%" PRId64, p->amount_cents);
    params[0] = p->event_id;
    params[1] = p->payment_id;
    params[2] = p->method;
    params[3] = p->decision;
    params[4] = amount;
    params[5] = p->currency;
    params[6] = p->payee_bank;
    params[7] = p->payee_account;
    params[8] = p->decided_at[0] ? p->decided_at : NULL;
    params[9] = fp_hex;
    params[10] = canon;
    params[11] = traceparent;
    params[12] = response;

    if ((err = db_begin(db, NULL)) != GW_OK)
        return err;
    res = db_prepared(db, "accept", 13, params);
    if ((err = db_check(res, PGRES_TUPLES_OK, "accept")) != GW_OK)
        goto rollback;
    if (PQntuples(res) != 1 || !outcome_parse(PQgetvalue(res, 0, 0), outcome)) {
        err = GW_ERR_DB;
        goto rollback;
    }
    snprintf(answer, alen, "%s", PQgetvalue(res, 0, 1));
    if (*outcome != OUTCOME_ACCEPTED) {
        err = db_exec(db, "ROLLBACK"); /* nothing was written; release the event's lock */
        goto done;
    }
    if ((err = failpoint_hit("api.before_commit")) != GW_OK)
        goto rollback;
    err = db_exec(db, "COMMIT"); /* only reached when every statement succeeded */
    goto done;
rollback:
    db_rollback(db); /* keep the first error */
done:
    PQclear(res);
    return err;
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

void payments_accept(const payments_deps *d, http_request *r)
{
    json_t *root = NULL;
    char *canon = NULL;
    char response[256], answer[256];
    const char *trace = http_request_header(r, "traceparent");
    accept_outcome outcome = OUTCOME_ACCEPTED;
    db_conn *db = NULL;
    payment p;
    gw_err err;

    if (!accept_validate(d, r, &root, &p))
        goto done;
    if (outbox_watch_over_limit(d->watch)) {
        metrics_add(d->metrics->backpressure, 1);
        problem_reply(r, d->metrics, 503, "outbox-backlog", "Service Unavailable",
                      "the relay is behind: too many payments wait to be published; retry later",
                      NULL, retry_backlog);
        goto done;
    }
    canon = canon_dump(root);
    if (canon == NULL) {
        problem_reply(r, d->metrics, 500, "internal-error", "Internal Error", "out of memory", NULL,
                      NULL);
        goto done;
    }
    snprintf(response, sizeof response,
             "{\"event_id\":\"%s\",\"payment_id\":\"%s\",\"status\":\"accepted\"}", p.event_id,
             p.payment_id); /* both ids are [A-Za-z0-9._:-]: nothing to escape */

    err = db_pool_acquire(d->pool, POOL_WAIT_MS, &db);
    if (err != GW_OK) {
        unavailable(d, r,
                    err == GW_ERR_RETRY ? "all database connections are busy"
                                        : "the database is unavailable");
        goto done;
    }
    err = accept_commit(db, &p, canon, traceparent_valid(trace) ? trace : NULL, response, &outcome,
                        answer, sizeof answer);
    db_pool_release(d->pool, db);
    if (err != GW_OK) {
        /* no COMMIT happened (or its outcome is unknown): never 202 */
        log_warn("accept_failed", "request_id=%s event_id=%s payment_id=%s error=%s",
                 http_request_id(r), p.event_id, p.payment_id, gw_err_str(err));
        unavailable(d, r, "the payment could not be committed; retry with the same event_id");
        goto done;
    }

    switch (outcome) {
    case OUTCOME_ACCEPTED:
        if (failpoint_hit("api.after_commit") != GW_OK)
            log_warn("failpoint_ignored", "point=api.after_commit");
        outbox_watch_committed(d->watch);
        metrics_add(d->metrics->accepted, 1);
        metrics_observe(d->metrics->accept_seconds, http_request_age(r));
        log_info("payment_accepted",
                 "request_id=%s event_id=%s payment_id=%s method=%s decision=%s "
                 "amount_cents=%" PRId64,
                 http_request_id(r), p.event_id, p.payment_id, p.method, p.decision,
                 p.amount_cents);
        reply_202(r, p.payment_id, answer, false);
        break;
    case OUTCOME_REPLAY:
        metrics_add(d->metrics->replayed, 1);
        log_info("payment_replayed", "request_id=%s event_id=%s payment_id=%s", http_request_id(r),
                 p.event_id, p.payment_id);
        reply_202(r, p.payment_id, answer, true);
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
done:
    free(canon);
    json_decref(root);
}

static json_t *text_or_null(PGresult *res, int col)
{
    return PQgetisnull(res, 0, col) ? json_null() : json_string(PQgetvalue(res, 0, col));
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
    json_object_set_new(o, "last_error", text_or_null(res, 10));
    json_object_set_new(o, "created_at", text_or_null(res, 11));
    json_object_set_new(o, "updated_at", text_or_null(res, 12));
    json_object_set_new(o, "settled_at", text_or_null(res, 13));
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
