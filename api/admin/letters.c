/* api/admin/letters.c - dead letters in PostgreSQL: what a message becomes, and back as JSON */
#include "api/admin/letters.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <sodium.h>

#include "shared/amqp/mq_headers.h"
#include "shared/lib/canon.h"
#include "shared/payment_status.h"
#include "shared/pg/pg_json.h"

/* The columns of a dead letter as the API shows it; see letter_json(). */
#define LETTER_COLUMNS                                                                             \
    "id, event_id, payment_id, routing_key, attempt, last_error, body_is_json, "                   \
    "CASE WHEN body_is_json THEN convert_from(body, 'UTF8') END, "                                 \
    "CASE WHEN NOT body_is_json THEN translate(encode(body, 'base64'), E'\\n', '') END, "          \
    "x_death::text, first_death_reason, " PG_JSON_TIME("drained_at") ", " PG_JSON_TIME(            \
        "replayed_at") ", "                                                                        \
                       "replayed_by, message_id, first_death_queue, first_death_exchange, "        \
                       "headers::text, "                                                           \
                       "group_key, replay_job, error_class"

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
    json_object_set_new(o, "event_id", pg_json_text(res, row, 1));
    json_object_set_new(o, "payment_id", pg_json_text(res, row, 2));
    json_object_set_new(o, "routing_key", pg_json_text(res, row, 3));
    json_object_set_new(o, "attempt",
                        PQgetisnull(res, row, 4) ? json_null()
                                                 : json_integer(atoi(PQgetvalue(res, row, 4))));
    json_object_set_new(o, "last_error", pg_json_text(res, row, 5));
    if (strcmp(PQgetvalue(res, row, 6), "t") == 0)
        json_object_set_new(o, "body", col_json(res, row, 7));
    else
        json_object_set_new(o, "body_base64", pg_json_text(res, row, 8));
    json_object_set_new(o, "x_death", col_json(res, row, 9));
    json_object_set_new(o, "first_death_reason", pg_json_text(res, row, 10));
    json_object_set_new(o, "first_death_queue", pg_json_text(res, row, 15));
    json_object_set_new(o, "first_death_exchange", pg_json_text(res, row, 16));
    json_object_set_new(o, "message_id", pg_json_text(res, row, 14));
    json_object_set_new(o, "headers", col_json(res, row, 17));
    json_object_set_new(o, "drained_at", pg_json_text(res, row, 11));
    json_object_set_new(o, "replayed_at", pg_json_text(res, row, 12));
    json_object_set_new(o, "replayed_by", pg_json_text(res, row, 13));
    json_object_set_new(o, "group", pg_json_text(res, row, 18));
    json_object_set_new(o, "error_class", pg_json_text(res, row, 20));
    if (PQgetisnull(res, row, 12))
        json_object_set_new(o, "replay", json_null());
    else
        json_object_set_new(o, "replay",
                            json_pack("{s:o,s:o,s:o}", "at", pg_json_text(res, row, 12), "by",
                                      pg_json_text(res, row, 13), "job",
                                      pg_json_text(res, row, 19)));
    return o;
}

/* ---------------------------------------------------------------- store */

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

/* The earliest x-death time: when the message first died. */
static void first_death_time(letter_fields *f)
{
    size_t i;
    json_t *d;

    json_array_foreach(f->x_death, i, d)
    {
        const char *t = json_str(d, "time");
        if (t != NULL && (f->died_at[0] == '\0' || strcmp(t, f->died_at) < 0))
            copy_str(f->died_at, sizeof f->died_at, t);
    }
}

/* The same message drained twice (a crash between COMMIT and ack) has the same key. */
static void dedupe_key(const dlq_broker_msg *m, letter_fields *f)
{
    char *canon = canon_dump(f->headers);
    crypto_generichash_state st;

    crypto_generichash_init(&st, NULL, 0, sizeof f->dedupe);
    crypto_generichash_update(&st, (const unsigned char *)f->message_id, strlen(f->message_id) + 1);
    if (canon != NULL)
        crypto_generichash_update(&st, (const unsigned char *)canon, strlen(canon) + 1);
    crypto_generichash_update(&st, m->msg.body.bytes, m->msg.body.len);
    crypto_generichash_final(&st, f->dedupe, sizeof f->dedupe);
    free(canon);
}

static void letter_fields_from(const dlq_broker_msg *m, letter_fields *f)
{
    const amqp_basic_properties_t *p = &m->msg.properties;
    amqp_table_t empty = {0, NULL};
    const json_t *v;

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
    first_death_time(f);
    dedupe_key(m, f);
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

gw_err letters_store(db_conn *db, const dlq_broker_msg *m, char *id)
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
        snprintf(id, LETTERS_ID_LEN, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    free(headers);
    free(x_death);
    letter_fields_clear(&f);
    return err;
}

/* ---------------------------------------------------------------- read */

gw_err letters_by_ids(db_conn *db, const char *ids, json_t **out)
{
    const char *params[1] = {ids};
    PGresult *res = PQexecParams(db_pg(db),
                                 "SELECT " LETTER_COLUMNS " FROM dead_letters "
                                 "WHERE id = ANY($1::bigint[]) ORDER BY id",
                                 1, NULL, params, NULL, NULL, 0);
    gw_err err = db_check(res, PGRES_TUPLES_OK, "dead_letters_by_id");

    if (err == GW_OK) {
        *out = json_array();
        for (int i = 0; i < PQntuples(res); i++)
            json_array_append_new(*out, letter_json(res, i));
    }
    PQclear(res);
    return err;
}

gw_err letters_page(db_conn *db, const letters_filter *f, long after, long limit, json_t **items,
                    json_t **next)
{
    char lim[24], after_buf[24];
    const char *params[6] = {NULL, lim, f->event_id, f->payment_id, f->group, f->q};
    PGresult *res;
    gw_err err;
    int n;

    if (after > 0)
        snprintf(after_buf, sizeof after_buf, "%ld", after);
    params[0] = after > 0 ? after_buf : NULL;
    snprintf(lim, sizeof lim, "%ld", limit + 1); /* one more tells whether a next page exists */
    /* q: a substring of the error (any case), the event id or the payment id */
    res = PQexecParams(db_pg(db),
                       "SELECT " LETTER_COLUMNS " FROM dead_letters "
                       "WHERE ($1::bigint IS NULL OR id < $1::bigint) "
                       "AND ($3::text IS NULL OR event_id = $3) "
                       "AND ($4::text IS NULL OR payment_id = $4) "
                       "AND ($5::text IS NULL OR group_key = $5) "
                       "AND ($6::text IS NULL OR strpos(lower(coalesce(last_error, '')), "
                       "lower($6)) > 0 OR strpos(coalesce(event_id, ''), $6) > 0 "
                       "OR strpos(coalesce(payment_id, ''), $6) > 0) "
                       "ORDER BY id DESC LIMIT $2::int",
                       6, NULL, params, NULL, NULL, 0);
    if ((err = db_check(res, PGRES_TUPLES_OK, "dead_letters_list")) == GW_OK) {
        *items = json_array();
        n = PQntuples(res);
        for (int i = 0; i < n && i < limit; i++)
            json_array_append_new(*items, letter_json(res, i));
        *next = n > limit ? json_string(PQgetvalue(res, (int)limit - 1, 0)) : json_null();
    }
    PQclear(res);
    return err;
}

gw_err letters_groups(db_conn *db, json_t **out)
{
    PGresult *res = PQexec(
        db_pg(db),
        "SELECT group_key, first_death_reason, error_class, count(*), "
        "count(*) FILTER (WHERE replayed_at IS NULL), " PG_JSON_TIME(
            "min(died_at)") ", " PG_JSON_TIME("max(died_at)") " FROM dead_letters GROUP BY "
                                                              "group_key, first_death_reason, "
                                                              "error_class "
                                                              "ORDER BY max(died_at) DESC "
                                                              "LIMIT " LETTERS_GROUPS_MAX_S);
    gw_err err = db_check(res, PGRES_TUPLES_OK, "dead_letter_groups");

    if (err == GW_OK) {
        *out = json_array();
        for (int i = 0; i < PQntuples(res); i++)
            json_array_append_new(
                *out, json_pack("{s:o,s:o,s:o,s:I,s:I,s:o,s:o}", "key", pg_json_text(res, i, 0),
                                "reason", pg_json_text(res, i, 1), "error", pg_json_text(res, i, 2),
                                "count", pg_json_int(res, i, 3), "not_replayed",
                                pg_json_int(res, i, 4), "first_seen", pg_json_text(res, i, 5),
                                "last_seen", pg_json_text(res, i, 6)));
    }
    PQclear(res);
    return err;
}

gw_err letters_get(db_conn *db, const char *id, json_t **out)
{
    const char *params[1] = {id};
    PGresult *res =
        PQexecParams(db_pg(db), "SELECT " LETTER_COLUMNS " FROM dead_letters WHERE id = $1::bigint",
                     1, NULL, params, NULL, NULL, 0);
    gw_err err = db_check(res, PGRES_TUPLES_OK, "dead_letter_get");

    if (err == GW_OK && PQntuples(res) == 0)
        err = GW_ERR_NOT_FOUND;
    else if (err == GW_OK)
        *out = letter_json(res, 0);
    PQclear(res);
    return err;
}

/* ---------------------------------------------------------------- replay */

/* Binary results: text columns are their raw bytes, booleans one byte. */
enum { R_EVENT, R_PAYMENT, R_MESSAGE, R_KEY, R_BODY, R_EXPIRED, R_REPLAYED, R_TRACE };

gw_err letters_lock(db_conn *db, const char *id, int retention_days, letters_locked *out)
{
    char days[16];
    const char *params[2] = {id, days};
    PGresult *res;
    gw_err err;

    memset(out, 0, sizeof *out);
    snprintf(days, sizeof days, "%d", retention_days);
    res = PQexecParams(db_pg(db),
                       "SELECT coalesce(event_id, ''), payment_id, message_id, "
                       "coalesce(routing_key, ''), body, "
                       "died_at < now() - make_interval(days => $2::int), replayed_at IS NOT NULL, "
                       "headers->>'traceparent' FROM dead_letters WHERE id = $1::bigint FOR UPDATE",
                       2, NULL, params, NULL, NULL, 1);
    out->res = res;
    if ((err = db_check(res, PGRES_TUPLES_OK, "dead_letter_lock")) != GW_OK)
        return err;
    if (PQntuples(res) == 0)
        return GW_ERR_NOT_FOUND;
    out->event_id = PQgetvalue(res, 0, R_EVENT);
    out->message_id = PQgetisnull(res, 0, R_MESSAGE) ? NULL : PQgetvalue(res, 0, R_MESSAGE);
    out->routing_key = PQgetvalue(res, 0, R_KEY);
    out->body = PQgetvalue(res, 0, R_BODY);
    out->body_len = (size_t)PQgetlength(res, 0, R_BODY);
    out->traceparent = PQgetisnull(res, 0, R_TRACE) ? NULL : PQgetvalue(res, 0, R_TRACE);
    out->expired = *PQgetvalue(res, 0, R_EXPIRED) != 0;
    out->replayed = *PQgetvalue(res, 0, R_REPLAYED) != 0;
    return GW_OK;
}

void letters_locked_clear(letters_locked *l)
{
    PQclear(l->res);
    l->res = NULL;
}

gw_err letters_mark_replayed(db_conn *db, const char *id, const char *actor, const char *event_id,
                             const char *job)
{
    const char *params[3] = {id, actor, event_id};
    /* dead_lettered -> published, the replay's own move in payment_may_move() */
    PGresult *res =
        PQexecParams(db_pg(db), PAYMENT_STATUS_SQL_REPLAYED, 3, NULL, params, NULL, NULL, 0);
    gw_err err = db_check(res, PGRES_COMMAND_OK, "dead_letter_replayed");

    PQclear(res);
    if (err != GW_OK || job == NULL)
        return err;
    /* the job's record of this letter, in the replay's own transaction */
    params[1] = job;
    res = PQexecParams(db_pg(db),
                       "WITH l AS (UPDATE dead_letters SET replay_job = $2::bigint "
                       "WHERE id = $1::bigint) "
                       "UPDATE replay_job_letters SET result = 'replayed', detail = NULL, "
                       "at = now() WHERE job_id = $2::bigint AND letter_id = $1::bigint",
                       2, NULL, params, NULL, NULL, 0);
    err = db_check(res, PGRES_COMMAND_OK, "replay_job_letter_replayed");
    PQclear(res);
    return err;
}
