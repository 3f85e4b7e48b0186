/* api/admin/dlq.c - dead letters: the DLQ's content made durable, inspectable and replayable */
#include "api/admin/dlq.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <sodium.h>

#include "api/problem.h"
#include "shared/amqp/mq.h"
#include "shared/amqp/mq_headers.h"
#include "shared/failpoint.h"
#include "shared/lib/canon.h"
#include "shared/lib/log.h"
#include "shared/mq_topology.h"
#include "shared/payment_status.h"

#define DRAIN_DEFAULT   100
#define DRAIN_MAX       1000
#define LIST_DEFAULT    50
#define LIST_MAX        1000
#define POOL_WAIT_MS    2000
#define CONFIRM_WAIT_MS 5000
#define REPLAYED_BY     "admin-token"

struct dlq {
    const gw_config *cfg;
    db_pool *pool;
    api_metrics *metrics;
    pthread_mutex_t lock; /* one admin broker call at a time */
    mq_conn *mq;          /* under lock; NULL until first use or after a failure */
};

/* The columns of a dead letter as the API shows it; see letter_json(). */
#define LETTER_COLUMNS                                                                             \
    "id, event_id, payment_id, routing_key, attempt, last_error, body_is_json, "                   \
    "CASE WHEN body_is_json THEN convert_from(body, 'UTF8') END, "                                 \
    "CASE WHEN NOT body_is_json THEN translate(encode(body, 'base64'), E'\\n', '') END, "          \
    "x_death::text, first_death_reason, "                                                          \
    "to_char(drained_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "                \
    "to_char(replayed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "               \
    "replayed_by, message_id, first_death_queue, first_death_exchange, headers::text"

static const char *const retry_1[] = {"Retry-After", "1", NULL};

gw_err dlq_new(const gw_config *cfg, db_pool *pool, api_metrics *m, dlq **out)
{
    dlq *d = calloc(1, sizeof *d);

    if (d == NULL)
        return GW_ERR_NOMEM;
    d->cfg = cfg;
    d->pool = pool;
    d->metrics = m;
    pthread_mutex_init(&d->lock, NULL);
    *out = d;
    return GW_OK;
}

void dlq_free(dlq *d)
{
    if (d == NULL)
        return;
    mq_close(d->mq);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* Under d->lock: a usable confirm-mode connection with the topology declared. */
static gw_err broker(dlq *d)
{
    gw_err err;

    if (d->mq != NULL && mq_fd(d->mq) >= 0)
        return GW_OK;
    mq_close(d->mq);
    d->mq = NULL;
    if ((err = mq_open(d->cfg->amqp_url, d->cfg->amqp_cacert, "payments-api-admin", true,
                       &d->mq)) != GW_OK)
        return err;
    if ((err = mq_topology_declare(d->mq, d->cfg)) != GW_OK) {
        mq_close(d->mq);
        d->mq = NULL;
    }
    return err;
}

static void broker_failed(dlq *d)
{
    mq_close(d->mq);
    d->mq = NULL;
}

static json_t *col_text(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

static json_t *col_json(const PGresult *res, int row, int col)
{
    json_t *v;

    if (PQgetisnull(res, row, col))
        return json_null();
    v = json_loads(PQgetvalue(res, row, col), JSON_DECODE_ANY, NULL);
    return v != NULL ? v : json_null();
}

/* One row of LETTER_COLUMNS as the contract's dead letter. */
static json_t *letter_json(const PGresult *res, int row)
{
    json_t *o = json_object();

    json_object_set_new(o, "id", json_integer(strtoll(PQgetvalue(res, row, 0), NULL, 10)));
    json_object_set_new(o, "event_id", col_text(res, row, 1));
    json_object_set_new(o, "payment_id", col_text(res, row, 2));
    json_object_set_new(o, "routing_key", col_text(res, row, 3));
    json_object_set_new(o, "attempt",
                        PQgetisnull(res, row, 4) ? json_null()
                                                 : json_integer(atoi(PQgetvalue(res, row, 4))));
    json_object_set_new(o, "last_error", col_text(res, row, 5));
    if (strcmp(PQgetvalue(res, row, 6), "t") == 0)
        json_object_set_new(o, "body", col_json(res, row, 7));
    else
        json_object_set_new(o, "body_base64", col_text(res, row, 8));
    json_object_set_new(o, "x_death", col_json(res, row, 9));
    json_object_set_new(o, "first_death_reason", col_text(res, row, 10));
    json_object_set_new(o, "first_death_queue", col_text(res, row, 15));
    json_object_set_new(o, "first_death_exchange", col_text(res, row, 16));
    json_object_set_new(o, "message_id", col_text(res, row, 14));
    json_object_set_new(o, "headers", col_json(res, row, 17));
    json_object_set_new(o, "drained_at", col_text(res, row, 11));
    json_object_set_new(o, "replayed_at", col_text(res, row, 12));
    json_object_set_new(o, "replayed_by", col_text(res, row, 13));
    return o;
}

/* Decimal digits only (no sign, no blanks), within min..max and without overflow. */
static bool parse_int(const char *s, long min, long max, long *out)
{
    char *end;

    if (s == NULL || *s < '0' || *s > '9')
        return false;
    errno = 0;
    *out = strtol(s, &end, 10);
    return errno == 0 && *end == '\0' && *out >= min && *out <= max;
}

static void reply_invalid(dlq *d, http_request *r, const char *pointer, const char *detail)
{
    field_errors errs = {.n = 1};

    snprintf(errs.e[0].pointer, sizeof errs.e[0].pointer, "%s", pointer);
    snprintf(errs.e[0].detail, sizeof errs.e[0].detail, "%s", detail);
    problem_reply(r, d->metrics, 422, "validation-failed", "Validation Failed", detail, &errs,
                  NULL);
}

/* ---------------------------------------------------------------- drain */

typedef struct drained {
    uint64_t tag;
    char routing_key[256];
    amqp_message_t msg;
} drained;

static const char *json_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key); /* borrowed */
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A dead letter's parameters, derived from the message alone (a pure function of it). */
typedef struct letter_fields {
    json_t *headers; /* owned */
    json_t *x_death; /* owned */
    json_t *body;    /* owned, NULL when the body is not JSON */
    char event_id[128], payment_id[128], message_id[128], routing_key[256];
    char attempt[16], last_error[512], died_at[40];
    char first_reason[64], first_queue[128], first_exchange[128];
    uint8_t dedupe[CANON_FINGERPRINT_LEN];
} letter_fields;

static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

static void letter_fields_from(const drained *m, letter_fields *f)
{
    const amqp_basic_properties_t *p = &m->msg.properties;
    amqp_table_t empty = {0, NULL};
    const json_t *v;
    char *canon;
    size_t i;
    json_t *d;

    memset(f, 0, sizeof *f);
    f->headers = mq_table_to_json((p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : &empty);
    f->x_death = mq_x_death(f->headers);
    f->body = json_loadb(m->msg.body.bytes, m->msg.body.len, JSON_REJECT_DUPLICATES, NULL);
    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        snprintf(f->message_id, sizeof f->message_id, "%.*s", (int)p->message_id.len,
                 (const char *)p->message_id.bytes);
    copy_str(f->event_id, sizeof f->event_id,
             f->message_id[0] ? f->message_id : json_str(f->body, "event_id"));
    copy_str(f->payment_id, sizeof f->payment_id, json_str(f->body, "payment_id"));
    if (json_str(f->body, "method") && json_str(f->body, "decision"))
        snprintf(f->routing_key, sizeof f->routing_key, "payment.%s.%s",
                 json_str(f->body, "method"), json_str(f->body, "decision"));
    else
        copy_str(f->routing_key, sizeof f->routing_key, m->routing_key);
    v = json_object_get(f->headers, "x-attempt");
    if (json_is_integer(v))
        snprintf(f->attempt, sizeof f->attempt, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    copy_str(f->last_error, sizeof f->last_error, json_str(f->headers, "x-last-error"));
    copy_str(f->first_reason, sizeof f->first_reason, json_str(f->headers, "x-first-death-reason"));
    copy_str(f->first_queue, sizeof f->first_queue, json_str(f->headers, "x-first-death-queue"));
    copy_str(f->first_exchange, sizeof f->first_exchange,
             json_str(f->headers, "x-first-death-exchange"));
    json_array_foreach(f->x_death, i, d)
    {
        const char *t = json_str(d, "time");
        if (t != NULL && (f->died_at[0] == '\0' || strcmp(t, f->died_at) < 0))
            copy_str(f->died_at, sizeof f->died_at, t);
    }
    /* the same message drained twice (a crash between COMMIT and ack) has the same key */
    canon = canon_dump(f->headers);
    {
        crypto_generichash_state st;
        crypto_generichash_init(&st, NULL, 0, sizeof f->dedupe);
        crypto_generichash_update(&st, (const unsigned char *)f->message_id,
                                  strlen(f->message_id) + 1);
        if (canon != NULL)
            crypto_generichash_update(&st, (const unsigned char *)canon, strlen(canon) + 1);
        crypto_generichash_update(&st, m->msg.body.bytes, m->msg.body.len);
        crypto_generichash_final(&st, f->dedupe, sizeof f->dedupe);
    }
    free(canon);
}

static void letter_fields_clear(letter_fields *f)
{
    json_decref(f->headers);
    json_decref(f->x_death);
    json_decref(f->body);
}

static const char *nonempty(const char *s)
{
    return s[0] ? s : NULL;
}

/* INSERT one letter (or find it, when drained before); its id into @id (size 24). */
static gw_err store_letter(db_conn *db, const drained *m, char *id)
{
    static const char sql[] =
        "INSERT INTO dead_letters (dedupe_key, event_id, payment_id, message_id, routing_key, "
        "attempt, last_error, headers, body, body_is_json, x_death, first_death_reason, "
        "first_death_queue, first_death_exchange, died_at) "
        "VALUES ($1::bytea, $2, $3, $4, $5, $6::int, "
        "coalesce((SELECT last_error FROM payments WHERE event_id = $2), $7), $8::jsonb, "
        "$9::bytea, "
        "$10::boolean, $11::jsonb, $12, $13, $14, coalesce($15::timestamptz, now())) "
        "ON CONFLICT (dedupe_key) DO UPDATE SET dedupe_key = EXCLUDED.dedupe_key RETURNING id";
    char key_hex[2 + 2 * CANON_FINGERPRINT_LEN + 1] = "\\x";
    const char *params[15];
    int lengths[15] = {0}, formats[15] = {0};
    char *headers = NULL, *x_death = NULL;
    letter_fields f;
    PGresult *res;
    gw_err err;

    letter_fields_from(m, &f);
    sodium_bin2hex(key_hex + 2, sizeof key_hex - 2, f.dedupe, sizeof f.dedupe);
    headers = json_dumps(f.headers, JSON_COMPACT);
    x_death = json_dumps(f.x_death, JSON_COMPACT);
    params[0] = key_hex;
    params[1] = nonempty(f.event_id);
    params[2] = nonempty(f.payment_id);
    params[3] = nonempty(f.message_id);
    params[4] = nonempty(f.routing_key);
    params[5] = nonempty(f.attempt);
    params[6] = nonempty(f.last_error);
    params[7] = headers ? headers : "{}";
    params[8] = m->msg.body.len ? m->msg.body.bytes : "";
    lengths[8] = (int)m->msg.body.len;
    formats[8] = 1; /* the body as raw bytes: no escaping, any content */
    params[9] = f.body != NULL ? "true" : "false";
    params[10] = x_death ? x_death : "[]";
    params[11] = nonempty(f.first_reason);
    params[12] = nonempty(f.first_queue);
    params[13] = nonempty(f.first_exchange);
    params[14] = nonempty(f.died_at);
    res = PQexecParams(db_pg(db), sql, 15, NULL, params, lengths, formats, 0);
    err = db_check(res, PGRES_TUPLES_OK, "dead_letter_insert");
    if (err == GW_OK)
        snprintf(id, 24, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    free(headers);
    free(x_death);
    letter_fields_clear(&f);
    return err;
}

/* basic.get up to @max messages without ack; returns how many into @out. */
static gw_err get_messages(dlq *d, long max, drained *out, long *n)
{
    amqp_connection_state_t c = mq_state(d->mq);

    *n = 0;
    while (*n < max) {
        amqp_rpc_reply_t r = amqp_basic_get(c, MQ_CHANNEL, mq_bytes(MQ_QUEUE_DLQ), 0);
        amqp_basic_get_ok_t *ok;
        drained *m = &out[*n];

        if (mq_check(r, "basic.get") != GW_OK)
            return GW_ERR_MQ;
        if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            break;
        ok = r.reply.decoded;
        m->tag = ok->delivery_tag;
        snprintf(m->routing_key, sizeof m->routing_key, "%.*s", (int)ok->routing_key.len,
                 (const char *)ok->routing_key.bytes);
        if (mq_check(amqp_read_message(c, MQ_CHANNEL, &m->msg, 0), "basic.get.content") != GW_OK)
            return GW_ERR_MQ;
        (*n)++;
    }
    return GW_OK;
}

static gw_err fetch_letters(db_conn *db, const char *ids, PGresult **out)
{
    const char *params[1] = {ids};

    *out = PQexecParams(db_pg(db),
                        "SELECT " LETTER_COLUMNS " FROM dead_letters WHERE id = ANY($1::bigint[]) "
                        "ORDER BY id",
                        1, NULL, params, NULL, NULL, 0);
    return db_check(*out, PGRES_TUPLES_OK, "dead_letters_by_id");
}

void dlq_drain(dlq *d, http_request *r)
{
    const char *max_s = http_request_query(r, "max");
    drained *msgs = NULL;
    char *ids = NULL;
    PGresult *res = NULL;
    db_conn *db = NULL;
    long max = DRAIN_DEFAULT, n = 0;
    gw_err err;

    if (max_s != NULL && !parse_int(max_s, 1, DRAIN_MAX, &max)) {
        reply_invalid(d, r, "/max", "max must be an integer in 1..1000");
        return;
    }
    msgs = calloc((size_t)max, sizeof *msgs);
    ids = malloc((size_t)max * 24 + 3);
    if (msgs == NULL || ids == NULL) {
        problem_reply(r, d->metrics, 500, "internal-error", "Internal Error", "out of memory", NULL,
                      NULL);
        goto out;
    }
    pthread_mutex_lock(&d->lock);
    if (broker(d) != GW_OK || get_messages(d, max, msgs, &n) != GW_OK) {
        broker_failed(d); /* unacked gets go back to the queue with the channel */
        pthread_mutex_unlock(&d->lock);
        problem_reply(r, d->metrics, 503, "broker-unavailable", "Service Unavailable",
                      "RabbitMQ is unavailable", NULL, retry_1);
        goto out;
    }
    if (n == 0) {
        pthread_mutex_unlock(&d->lock);
        http_reply_json(r, 200, json_pack("{s:i,s:[]}", "drained", 0, "messages"), NULL);
        goto out;
    }
    err = db_pool_acquire(d->pool, POOL_WAIT_MS, &db);
    if (err == GW_OK && (err = db_begin(db, NULL)) == GW_OK) {
        size_t len = 0;
        ids[len++] = '{';
        for (long i = 0; i < n && err == GW_OK; i++) {
            char id[24];
            if ((err = store_letter(db, &msgs[i], id)) == GW_OK)
                len += (size_t)snprintf(ids + len, 24, "%s%s", i ? "," : "", id);
        }
        ids[len++] = '}';
        ids[len] = '\0';
        if (err == GW_OK)
            err = db_exec(db, "COMMIT");
        else
            db_rollback(db);
    }
    if (err != GW_OK) {
        /* nothing stored: give every message back to the DLQ */
        if (amqp_basic_nack(mq_state(d->mq), MQ_CHANNEL, msgs[n - 1].tag, 1, 1) != AMQP_STATUS_OK)
            broker_failed(d);
        pthread_mutex_unlock(&d->lock);
        if (db != NULL)
            db_pool_release(d->pool, db);
        problem_reply(r, d->metrics, 503, "service-unavailable", "Service Unavailable",
                      "the dead letters could not be stored; they stay in the DLQ", NULL, retry_1);
        goto out;
    }
    if (failpoint_hit("admin.after_commit") != GW_OK)
        log_warn("failpoint_ignored", "point=admin.after_commit");
    /* durable first, acknowledged second: a crash here redelivers, the dedupe key absorbs it */
    if (amqp_basic_ack(mq_state(d->mq), MQ_CHANNEL, msgs[n - 1].tag, 1) != AMQP_STATUS_OK)
        broker_failed(d);
    pthread_mutex_unlock(&d->lock);
    log_info("dlq_drained", "request_id=%s messages=%ld", http_request_id(r), n);

    if (fetch_letters(db, ids, &res) == GW_OK) {
        json_t *list = json_array();
        for (int i = 0; i < PQntuples(res); i++)
            json_array_append_new(list, letter_json(res, i));
        http_reply_json(r, 200, json_pack("{s:i,s:o}", "drained", (int)n, "messages", list), NULL);
    } else {
        http_reply_json(r, 200, json_pack("{s:i,s:[]}", "drained", (int)n, "messages"), NULL);
    }
    PQclear(res);
    db_pool_release(d->pool, db);
out:
    for (long i = 0; msgs != NULL && i < n; i++)
        amqp_destroy_message(&msgs[i].msg);
    free(msgs);
    free(ids);
}

/* ---------------------------------------------------------------- list, get */

static bool acquire(dlq *d, http_request *r, db_conn **db)
{
    if (db_pool_acquire(d->pool, POOL_WAIT_MS, db) == GW_OK)
        return true;
    problem_reply(r, d->metrics, 503, "service-unavailable", "Service Unavailable",
                  "the database is unavailable", NULL, retry_1);
    return false;
}

void dlq_list(dlq *d, http_request *r)
{
    const char *limit_s = http_request_query(r, "limit");
    const char *after_s = http_request_query(r, "after");
    char lim[24], after_buf[24];
    const char *params[2] = {NULL, lim};
    long limit = LIST_DEFAULT, after = 0;
    PGresult *res;
    db_conn *db = NULL;
    json_t *items;
    int n;

    if (limit_s != NULL && !parse_int(limit_s, 1, LIST_MAX, &limit)) {
        reply_invalid(d, r, "/limit", "limit must be an integer in 1..1000");
        return;
    }
    if (after_s != NULL && !parse_int(after_s, 1, INT64_MAX, &after)) {
        reply_invalid(d, r, "/after", "after must be the next cursor of a previous page");
        return;
    }
    if (after_s != NULL)
        snprintf(after_buf, sizeof after_buf, "%ld", after);
    params[0] = after_s != NULL ? after_buf : NULL;
    snprintf(lim, sizeof lim, "%ld", limit + 1); /* one more tells whether a next page exists */
    if (!acquire(d, r, &db))
        return;
    res = PQexecParams(db_pg(db),
                       "SELECT " LETTER_COLUMNS " FROM dead_letters "
                       "WHERE $1::bigint IS NULL OR id < $1::bigint ORDER BY id DESC LIMIT $2::int",
                       2, NULL, params, NULL, NULL, 0);
    db_pool_release(d->pool, db);
    if (db_check(res, PGRES_TUPLES_OK, "dead_letters_list") != GW_OK) {
        PQclear(res);
        problem_reply(r, d->metrics, 503, "service-unavailable", "Service Unavailable",
                      "the database is unavailable", NULL, retry_1);
        return;
    }
    items = json_array();
    n = PQntuples(res);
    for (int i = 0; i < n && i < limit; i++)
        json_array_append_new(items, letter_json(res, i));
    http_reply_json(
        r, 200,
        json_pack("{s:o,s:o}", "items", items, "next",
                  n > limit ? json_string(PQgetvalue(res, (int)limit - 1, 0)) : json_null()),
        NULL);
    PQclear(res);
}

static PGresult *letter_by_id(db_conn *db, const char *id)
{
    const char *params[1] = {id};

    return PQexecParams(db_pg(db),
                        "SELECT " LETTER_COLUMNS " FROM dead_letters WHERE id = $1::bigint", 1,
                        NULL, params, NULL, NULL, 0);
}

void dlq_get(dlq *d, http_request *r, const char *id)
{
    PGresult *res;
    db_conn *db = NULL;
    long v;

    if (!parse_int(id, 1, INT64_MAX, &v)) {
        problem_reply(r, d->metrics, 404, "not-found", "Not Found", "no such dead letter", NULL,
                      NULL);
        return;
    }
    if (!acquire(d, r, &db))
        return;
    res = letter_by_id(db, id);
    db_pool_release(d->pool, db);
    if (db_check(res, PGRES_TUPLES_OK, "dead_letter_get") != GW_OK)
        problem_reply(r, d->metrics, 503, "service-unavailable", "Service Unavailable",
                      "the database is unavailable", NULL, retry_1);
    else if (PQntuples(res) == 0)
        problem_reply(r, d->metrics, 404, "not-found", "Not Found", "no such dead letter", NULL,
                      NULL);
    else
        http_reply_json(r, 200, letter_json(res, 0), NULL);
    PQclear(res);
}

/* ---------------------------------------------------------------- replay */

/* Binary results: text columns are their raw bytes, booleans one byte. */
enum { R_EVENT, R_PAYMENT, R_MESSAGE, R_KEY, R_BODY, R_EXPIRED, R_REPLAYED, R_TRACE };

static gw_err mark_replayed(db_conn *db, const char *id, const char *actor, const char *event_id)
{
    const char *params[3] = {id, actor, event_id};
    /* dead_lettered -> published, the replay's own move in payment_may_move() */
    PGresult *res =
        PQexecParams(db_pg(db), PAYMENT_STATUS_SQL_REPLAYED, 3, NULL, params, NULL, NULL, 0);
    gw_err err = db_check(res, PGRES_COMMAND_OK, "dead_letter_replayed");

    PQclear(res);
    return err;
}

/* Publish the letter of row 0 of @res again; GW_ERR_NOT_FOUND when the broker returned it. */
static gw_err republish(dlq *d, const PGresult *res, const char *id, char *why, size_t len)
{
    const char *event_id = PQgetvalue(res, 0, R_EVENT);
    /* names the letter: a second death is a new letter even within the same second
     * (no x- prefix: the worker's retry copies keep it) */
    amqp_table_entry_t of = {mq_bytes("paygw-replay-of"),
                             {AMQP_FIELD_KIND_UTF8, {.bytes = mq_bytes(id)}}};
    amqp_table_t extra = {1, &of};
    mq_message m = {
        .exchange = MQ_EXCHANGE_EVENTS,
        .routing_key = PQgetvalue(res, 0, R_KEY),
        .message_id = PQgetisnull(res, 0, R_MESSAGE) ? event_id : PQgetvalue(res, 0, R_MESSAGE),
        .type = MQ_MESSAGE_TYPE,
        .body = PQgetvalue(res, 0, R_BODY),
        .len = (size_t)PQgetlength(res, 0, R_BODY),
        .attempt = 1, /* a fresh start: x-attempt, not x-death, counts the retries */
        .traceparent = PQgetisnull(res, 0, R_TRACE) ? NULL : PQgetvalue(res, 0, R_TRACE),
        .extra_headers = &extra,
    };
    gw_err err;

    pthread_mutex_lock(&d->lock);
    err = broker(d);
    if (err == GW_OK)
        err = mq_publish_confirmed(d->mq, &m, CONFIRM_WAIT_MS, why, len);
    if (err != GW_OK && err != GW_ERR_NOT_FOUND)
        broker_failed(d);
    pthread_mutex_unlock(&d->lock);
    return err;
}

void dlq_replay(dlq *d, http_request *r, const char *id)
{
    char days[16], why[160];
    const char *params[2] = {id, days};
    const char *actor;
    PGresult *res = NULL;
    db_conn *db = NULL;
    json_t *answer;
    long v;
    gw_err err;

    if (!parse_int(id, 1, INT64_MAX, &v)) {
        problem_reply(r, d->metrics, 404, "not-found", "Not Found", "no such dead letter", NULL,
                      NULL);
        return;
    }
    /* who replays: the operator's name from X-Actor when given, else the credential used */
    actor = http_request_header(r, "X-Actor");
    if (actor == NULL || !payment_id_valid(actor, strlen(actor)))
        actor = REPLAYED_BY;
    snprintf(days, sizeof days, "%d", d->cfg->inbox_retention_days);
    if (!acquire(d, r, &db))
        return;
    if (db_begin(db, NULL) != GW_OK)
        goto unavailable;
    /* FOR UPDATE: two replays of one letter cannot both publish */
    res = PQexecParams(db_pg(db),
                       "SELECT coalesce(event_id, ''), payment_id, message_id, "
                       "coalesce(routing_key, ''), body, "
                       "died_at < now() - make_interval(days => $2::int), replayed_at IS NOT NULL, "
                       "headers->>'traceparent' FROM dead_letters WHERE id = $1::bigint FOR UPDATE",
                       2, NULL, params, NULL, NULL, 1);
    if (db_check(res, PGRES_TUPLES_OK, "dead_letter_lock") != GW_OK)
        goto rollback_unavailable;
    if (PQntuples(res) == 0) {
        db_rollback(db);
        problem_reply(r, d->metrics, 404, "not-found", "Not Found", "no such dead letter", NULL,
                      NULL);
        goto out;
    }
    if (*PQgetvalue(res, 0, R_REPLAYED)) {
        db_rollback(db);
        problem_reply(r, d->metrics, 409, "already-replayed", "Already Replayed",
                      "this dead letter was replayed before", NULL, NULL);
        goto out;
    }
    if (*PQgetvalue(res, 0, R_EXPIRED)) {
        /* the inbox may have forgotten the event: a replay could settle it twice */
        db_rollback(db);
        problem_reply(r, d->metrics, 409, "replay-window-expired", "Replay Window Expired",
                      "the dead letter is older than the inbox retention (INBOX_RETENTION_DAYS)",
                      NULL, NULL);
        goto out;
    }
    /*
     * Mark first, publish second, COMMIT last: the UPDATE holds the payment's row lock, so a
     * worker that takes the message at once waits for this COMMIT and sees `published`, not
     * `dead_lettered` (which it would ack as terminal, losing the replay).
     */
    if (mark_replayed(db, id, actor, PQgetvalue(res, 0, R_EVENT)) != GW_OK)
        goto rollback_unavailable;
    err = republish(d, res, id, why, sizeof why);
    if (err == GW_ERR_NOT_FOUND) {
        db_rollback(db);
        problem_reply(r, d->metrics, 409, "replay-unroutable", "Replay Unroutable", why, NULL,
                      NULL);
        goto out;
    }
    if (err != GW_OK) {
        db_rollback(db);
        problem_reply(r, d->metrics, 503, "broker-unavailable", "Service Unavailable",
                      "RabbitMQ did not confirm the replay; nothing was recorded", NULL, retry_1);
        goto out;
    }
    if (db_exec(db, "COMMIT") != GW_OK) {
        /* published but not recorded: a second replay is possible, the inbox keeps one effect */
        db_rollback(db);
        goto unavailable;
    }
    log_info("dead_letter_replayed", "request_id=%s id=%s event_id=%s actor=%s", http_request_id(r),
             id, PQgetvalue(res, 0, R_EVENT), actor);
    answer = json_pack("{s:I,s:s,s:s}", "id", (json_int_t)v, "event_id",
                       PQgetvalue(res, 0, R_EVENT), "status", "replayed");
    http_reply_json(r, 202, answer, NULL);
    goto out;
rollback_unavailable:
    db_rollback(db);
unavailable:
    problem_reply(r, d->metrics, 503, "service-unavailable", "Service Unavailable",
                  "the database is unavailable", NULL, retry_1);
out:
    PQclear(res);
    db_pool_release(d->pool, db);
}
