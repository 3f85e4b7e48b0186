/* api/admin/dlq.c - the admin's DLQ endpoints: drain, list, get and replay over HTTP */
#include "api/admin/dlq.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/admin/dlq_broker.h"
#include "api/admin/letters.h"
#include "api/admin/replay.h"
#include "api/params.h"
#include "api/problem.h"
#include "shared/failpoint.h"
#include "shared/lib/log.h"

#define DRAIN_DEFAULT 100
#define DRAIN_MAX     1000
#define LIST_DEFAULT  50
#define LIST_MAX      1000
#define POOL_WAIT_MS  2000

struct dlq {
    const gw_config *cfg;
    db_pool *pool;
    api_metrics *metrics;
    dlq_broker *broker; /* owned */
};

static const char *const retry_1[] = {"Retry-After", "1", NULL};

gw_err dlq_new(const gw_config *cfg, db_pool *pool, api_metrics *m, dlq **out)
{
    dlq *d = calloc(1, sizeof *d);
    gw_err err;

    if (d == NULL)
        return GW_ERR_NOMEM;
    d->cfg = cfg;
    d->pool = pool;
    d->metrics = m;
    err = dlq_broker_new(cfg, &d->broker);
    return GW_BUILT(err, d, dlq_free, out);
}

void dlq_free(dlq *d)
{
    if (d == NULL)
        return;
    dlq_broker_free(d->broker);
    free(d);
}

static void reply_invalid(dlq *d, http_request *r, const char *pointer, const char *detail)
{
    problem_reply_invalid(r, d->metrics, pointer, detail);
}

static void reply_db_unavailable(dlq *d, http_request *r)
{
    problem_reply_unavailable(r, d->metrics, "the database is unavailable");
}

static void reply_not_found(dlq *d, http_request *r)
{
    problem_reply(r, d->metrics, 404, "not-found", "Not Found", "no such dead letter", NULL, NULL);
}

static bool acquire(dlq *d, http_request *r, db_conn **db)
{
    if (db_pool_acquire(d->pool, POOL_WAIT_MS, db) == GW_OK)
        return true;
    reply_db_unavailable(d, r);
    return false;
}

/* ---------------------------------------------------------------- drain */

/*
 * Store the @n letters in one transaction on a pooled connection (into *@db, which the
 * caller releases) and COMMIT; their ids into @ids as a bigint[] literal.
 */
static gw_err store_letters(dlq *d, const dlq_broker_msg *msgs, long n, char *ids, db_conn **db)
{
    gw_err err = db_pool_acquire(d->pool, POOL_WAIT_MS, db);

    if (err == GW_OK && (err = db_begin(*db, NULL)) == GW_OK) {
        size_t len = 0;
        ids[len++] = '{';
        for (long i = 0; i < n && err == GW_OK; i++) {
            char id[LETTERS_ID_LEN];
            if ((err = letters_store(*db, &msgs[i], id)) == GW_OK)
                len += (size_t)snprintf(ids + len, LETTERS_ID_LEN, "%s%s", i ? "," : "", id);
        }
        ids[len++] = '}';
        ids[len] = '\0';
        if (err == GW_OK)
            err = db_commit(*db);
        else
            db_rollback(*db);
    }
    return err;
}

/* 200 with the stored letters; only the count when they cannot be read back. */
static void reply_drained(http_request *r, db_conn *db, const char *ids, long n)
{
    json_t *list;

    if (letters_by_ids(db, ids, &list) == GW_OK)
        http_reply_json(r, 200, json_pack("{s:i,s:o}", "drained", (int)n, "messages", list), NULL);
    else
        http_reply_json(r, 200, json_pack("{s:i,s:[]}", "drained", (int)n, "messages"), NULL);
}

void dlq_drain(dlq *d, http_request *r)
{
    const char *max_s = http_request_query(r, "max");
    dlq_broker_msg *msgs = NULL;
    char *ids = NULL;
    db_conn *db = NULL;
    long max = DRAIN_DEFAULT, n = 0;

    if (max_s != NULL && !params_long(max_s, 1, DRAIN_MAX, &max)) {
        reply_invalid(d, r, "/max", "max must be an integer in 1..1000");
        return;
    }
    msgs = calloc((size_t)max, sizeof *msgs);
    ids = malloc((size_t)max * LETTERS_ID_LEN + 3);
    if (msgs == NULL || ids == NULL) {
        problem_reply(r, d->metrics, 500, "internal-error", "Internal Error", "out of memory", NULL,
                      NULL);
        goto out;
    }
    dlq_broker_lock(d->broker);
    if (dlq_broker_get(d->broker, max, msgs, &n) != GW_OK) {
        dlq_broker_unlock(d->broker);
        problem_reply(r, d->metrics, 503, "broker-unavailable", "Service Unavailable",
                      "RabbitMQ is unavailable", NULL, retry_1);
        goto out;
    }
    if (n == 0) {
        dlq_broker_unlock(d->broker);
        http_reply_json(r, 200, json_pack("{s:i,s:[]}", "drained", 0, "messages"), NULL);
        goto out;
    }
    if (store_letters(d, msgs, n, ids, &db) != GW_OK) {
        /* nothing stored: give every message back to the DLQ */
        dlq_broker_requeue_upto(d->broker, msgs[n - 1].tag);
        dlq_broker_unlock(d->broker);
        problem_reply(r, d->metrics, 503, "service-unavailable", "Service Unavailable",
                      "the dead letters could not be stored; they stay in the DLQ", NULL, retry_1);
        goto out;
    }
    if (failpoint_hit("admin.after_commit") != GW_OK)
        log_warn("failpoint_ignored", "point=admin.after_commit");
    /* durable first, acknowledged second: a crash here redelivers, the dedupe key absorbs it */
    dlq_broker_ack_upto(d->broker, msgs[n - 1].tag);
    dlq_broker_unlock(d->broker);
    log_info("dlq_drained", "request_id=%s messages=%ld", http_request_id(r), n);
    reply_drained(r, db, ids, n);
out:
    if (db != NULL)
        db_pool_release(d->pool, db);
    for (long i = 0; msgs != NULL && i < n; i++)
        dlq_broker_msg_clear(&msgs[i]);
    free(msgs);
    free(ids);
}

/* ---------------------------------------------------------------- list, get */

/* A filter's value from the query: NULL when absent or empty; false when too long. */
static bool filter_param(dlq *d, http_request *r, const char *name, const char **out)
{
    char pointer[32];

    *out = http_request_query(r, name);
    if (*out != NULL && (*out)[0] == '\0')
        *out = NULL;
    if (*out == NULL || strlen(*out) <= 200)
        return true;
    snprintf(pointer, sizeof pointer, "/%s", name);
    reply_invalid(d, r, pointer, "a search value is at most 200 characters");
    return false;
}

void dlq_list(dlq *d, http_request *r)
{
    const char *limit_s = http_request_query(r, "limit");
    const char *after_s = http_request_query(r, "after");
    long limit = LIST_DEFAULT, after = 0;
    letters_filter f = {0};
    json_t *items, *next;
    db_conn *db = NULL;
    gw_err err;

    if (limit_s != NULL && !params_long(limit_s, 1, LIST_MAX, &limit)) {
        reply_invalid(d, r, "/limit", "limit must be an integer in 1..1000");
        return;
    }
    if (after_s != NULL && !params_long(after_s, 1, INT64_MAX, &after)) {
        reply_invalid(d, r, "/after", "after must be the next cursor of a previous page");
        return;
    }
    if (!filter_param(d, r, "event_id", &f.event_id) ||
        !filter_param(d, r, "payment_id", &f.payment_id) ||
        !filter_param(d, r, "group", &f.group) || !filter_param(d, r, "q", &f.q))
        return;
    if (!acquire(d, r, &db))
        return;
    err = letters_page(db, &f, after, limit, &items, &next);
    db_pool_release(d->pool, db);
    if (err != GW_OK) {
        reply_db_unavailable(d, r);
        return;
    }
    http_reply_json(r, 200, json_pack("{s:o,s:o}", "items", items, "next", next), NULL);
}

void dlq_groups(dlq *d, http_request *r)
{
    db_conn *db = NULL;
    json_t *groups;
    gw_err err;

    if (!acquire(d, r, &db))
        return;
    err = letters_groups(db, &groups);
    db_pool_release(d->pool, db);
    if (err != GW_OK) {
        reply_db_unavailable(d, r);
        return;
    }
    http_reply_json(r, 200, json_pack("{s:o}", "groups", groups), NULL);
}

void dlq_get(dlq *d, http_request *r, const char *id)
{
    db_conn *db = NULL;
    json_t *letter;
    gw_err err;
    long v;

    if (!params_long(id, 1, INT64_MAX, &v)) {
        reply_not_found(d, r);
        return;
    }
    if (!acquire(d, r, &db))
        return;
    err = letters_get(db, id, &letter);
    db_pool_release(d->pool, db);
    if (err == GW_ERR_NOT_FOUND)
        reply_not_found(d, r);
    else if (err != GW_OK)
        reply_db_unavailable(d, r);
    else
        http_reply_json(r, 200, letter, NULL);
}

/* ---------------------------------------------------------------- replay */

const char *dlq_replay_result_name(dlq_replay_result res)
{
    static const char *const names[] = {
        [DLQ_REPLAYED] = "replayed",
        [DLQ_REPLAY_NOT_FOUND] = "not_found",
        [DLQ_REPLAY_ALREADY] = "already_replayed",
        [DLQ_REPLAY_EXPIRED] = "window_expired",
        [DLQ_REPLAY_UNROUTABLE] = "unroutable",
        [DLQ_REPLAY_BROKER_DOWN] = "failed",
        [DLQ_REPLAY_DB_DOWN] = "failed",
    };
    return names[res];
}

/*
 * The letter @l is locked in @db's open transaction and may be replayed: mark it, publish
 * it, COMMIT. Ends the transaction in every case.
 */
static dlq_replay_result replay_locked(dlq *d, db_conn *db, const letters_locked *l, const char *id,
                                       const char *actor, const char *job, char *why, size_t len)
{
    gw_err err;

    /*
     * Mark first, publish second, COMMIT last: the UPDATE holds the payment's row lock, so a
     * worker that takes the message at once waits for this COMMIT and sees `published`, not
     * `dead_lettered` (which it would ack as terminal, losing the replay).
     */
    if (letters_mark_replayed(db, id, actor, l->event_id, job) != GW_OK) {
        db_rollback(db);
        snprintf(why, len, "the database is unavailable");
        return DLQ_REPLAY_DB_DOWN;
    }
    err = replay_publish(d->broker, l, id, why, len);
    if (err == GW_ERR_NOT_FOUND) {
        db_rollback(db);
        return DLQ_REPLAY_UNROUTABLE;
    }
    if (err != GW_OK) {
        db_rollback(db);
        snprintf(why, len, "RabbitMQ did not confirm the replay; nothing was recorded");
        return DLQ_REPLAY_BROKER_DOWN;
    }
    if (db_commit(db) != GW_OK) {
        /* published but not recorded: a second replay is possible, the inbox keeps one effect */
        db_rollback(db);
        snprintf(why, len, "the database is unavailable");
        return DLQ_REPLAY_DB_DOWN;
    }
    log_info("dead_letter_replayed", "id=%s event_id=%s actor=%s job=%s", id, l->event_id, actor,
             job != NULL ? job : "-");
    return DLQ_REPLAYED;
}

/*
 * Whether the letter that letters_lock() answered @err and @l for may be replayed; when not,
 * *@res says why (and @why, unless NULL). The one place both replays decide it.
 */
static bool replayable(gw_err err, const letters_locked *l, dlq_replay_result *res, char *why,
                       size_t len)
{
    const char *text;

    if (err == GW_ERR_NOT_FOUND) {
        *res = DLQ_REPLAY_NOT_FOUND;
        text = "no such dead letter";
    } else if (err != GW_OK) {
        *res = DLQ_REPLAY_DB_DOWN;
        text = "the database is unavailable";
    } else if (l->replayed) {
        *res = DLQ_REPLAY_ALREADY;
        text = "this dead letter was replayed before";
    } else if (l->expired) { /* the inbox may have forgotten the event: it could settle twice */
        *res = DLQ_REPLAY_EXPIRED;
        text = "the dead letter is older than the inbox retention (INBOX_RETENTION_DAYS)";
    } else {
        return true;
    }
    if (why != NULL)
        snprintf(why, len, "%s", text);
    return false;
}

dlq_replay_result dlq_replay_one(dlq *d, db_conn *db, const char *id, const char *actor,
                                 const char *job, char *event_id, size_t event_len, char *why,
                                 size_t len)
{
    letters_locked l = {0};
    dlq_replay_result res;
    gw_err err;

    why[0] = '\0';
    event_id[0] = '\0';
    /* the letter is locked FOR UPDATE: two replays of one letter cannot both publish */
    if (db_begin(db, NULL) != GW_OK) {
        snprintf(why, len, "the database is unavailable");
        return DLQ_REPLAY_DB_DOWN;
    }
    err = letters_lock(db, id, d->cfg->inbox_retention_days, &l);
    if (err == GW_OK)
        snprintf(event_id, event_len, "%s", l.event_id);
    if (replayable(err, &l, &res, why, len)) {
        res = replay_locked(d, db, &l, id, actor, job, why, len);
        letters_locked_clear(&l);
        return res;
    }
    db_rollback(db);
    letters_locked_clear(&l);
    return res;
}

bool dlq_replay_batch(dlq *d, db_conn *db, const char *const *ids, size_t n, const char *actor,
                      const char *job, dlq_replay_result *res)
{
    letters_locked *l = calloc(n + 1, sizeof *l), *pub = calloc(n + 1, sizeof *pub);
    const char **pub_ids = calloc(n + 1, sizeof *pub_ids);
    size_t *pub_at = calloc(n + 1, sizeof *pub_at), np = 0;
    gw_err *each = calloc(n + 1, sizeof *each), err;
    bool ok = false;

    if (l == NULL || pub == NULL || pub_ids == NULL || pub_at == NULL || each == NULL ||
        db_begin(db, NULL) != GW_OK)
        goto out;
    /* lock and mark each (see replay_locked() for why the mark comes first) */
    for (size_t i = 0; i < n; i++) {
        err = letters_lock(db, ids[i], d->cfg->inbox_retention_days, &l[i]);
        if (err != GW_OK && err != GW_ERR_NOT_FOUND)
            goto rollback; /* the caller goes one by one */
        if (!replayable(err, &l[i], &res[i], NULL, 0))
            continue;
        if (letters_mark_replayed(db, ids[i], actor, l[i].event_id, job) != GW_OK)
            goto rollback;
        pub[np] = l[i]; /* a shallow copy: l[i] still owns the result */
        pub_ids[np] = ids[i];
        pub_at[np++] = i;
    }
    /* one confirm round for the lot; anything but all confirmed: undo, let the caller go
     * one by one (what was published is published again: the inbox keeps one effect) */
    if (np > 0 && replay_publish_many(d->broker, pub, pub_ids, np, each) != GW_OK)
        goto rollback;
    for (size_t k = 0; k < np; k++)
        if (each[k] != GW_OK)
            goto rollback;
    if (db_commit(db) != GW_OK)
        goto rollback;
    for (size_t k = 0; k < np; k++) {
        res[pub_at[k]] = DLQ_REPLAYED;
        log_info("dead_letter_replayed", "id=%s event_id=%s actor=%s job=%s", pub_ids[k],
                 pub[k].event_id, actor, job != NULL ? job : "-");
    }
    ok = true;
    goto out;
rollback:
    db_rollback(db);
out:
    for (size_t i = 0; l != NULL && i < n; i++)
        letters_locked_clear(&l[i]);
    free(l);
    free(pub);
    free(pub_ids);
    free(pub_at);
    free(each);
    return ok;
}

void dlq_replay(dlq *d, http_request *r, const char *id, const char *actor)
{
    char why[240], event_id[128];
    dlq_replay_result res;
    db_conn *db = NULL;
    long v;

    if (!params_long(id, 1, INT64_MAX, &v)) {
        reply_not_found(d, r);
        return;
    }
    if (!acquire(d, r, &db))
        return;
    res = dlq_replay_one(d, db, id, actor, NULL, event_id, sizeof event_id, why, sizeof why);
    db_pool_release(d->pool, db);
    switch (res) {
    case DLQ_REPLAYED:
        log_info("dead_letter_replay_answered", "request_id=%s id=%s", http_request_id(r), id);
        http_reply_json(r, 202,
                        json_pack("{s:I,s:s,s:s}", "id", (json_int_t)v, "event_id", event_id,
                                  "status", "replayed"),
                        NULL);
        return;
    case DLQ_REPLAY_NOT_FOUND:
        reply_not_found(d, r);
        return;
    case DLQ_REPLAY_ALREADY:
        problem_reply(r, d->metrics, 409, "already-replayed", "Already Replayed", why, NULL, NULL);
        return;
    case DLQ_REPLAY_EXPIRED:
        problem_reply(r, d->metrics, 409, "replay-window-expired", "Replay Window Expired", why,
                      NULL, NULL);
        return;
    case DLQ_REPLAY_UNROUTABLE:
        problem_reply(r, d->metrics, 409, "replay-unroutable", "Replay Unroutable", why, NULL,
                      NULL);
        return;
    case DLQ_REPLAY_BROKER_DOWN:
        problem_reply(r, d->metrics, 503, "broker-unavailable", "Service Unavailable", why, NULL,
                      retry_1);
        return;
    case DLQ_REPLAY_DB_DOWN:
        reply_db_unavailable(d, r);
        return;
    }
}

/* ---------------------------------------------------------------- queues */

json_t *dlq_queue_depths(dlq *d)
{
    json_t *out;

    dlq_broker_lock(d->broker);
    out = dlq_broker_queue_depths(d->broker);
    dlq_broker_unlock(d->broker);
    return out;
}
