/* api/console/replay_jobs.c - replay jobs: recorded first, then worked letter by letter at a
 * bounded rate by one thread, each letter replayed as POST /admin/dlq/{id}/replay does */
#include "api/console/replay_jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/params.h"
#include "api/problem.h"
#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"
#include "shared/pg/pg_json.h"

#define POOL_WAIT_MS     2000
#define IDS_MAX          1000 /* a selection; a bigger one is a group */
#define JOBS_LISTED      "50" /* GET /admin/replays: the latest jobs */
#define LETTERS_PAGE     200
#define LETTERS_MAX      1000
#define TRIES_PER_LETTER 5 /* broker or database down: wait and try again, then record failed */
#define IDLE_POLL_MS     1000
#define BATCH_MAX        100 /* letters in one transaction and one confirm round */

struct replay_jobs {
    const gw_config *cfg;
    dlq *dlq;
    db_pool *pool;
    api_metrics *metrics;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a job was created, or stop */
    bool stop, work;     /* under lock */
    db_conn *db;         /* the thread's own */
};

/* ---------------------------------------------------------------- the thread */

static void ms_from_now(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Sleep @ms unless told to stop; whether to go on. */
static bool pause_ms(replay_jobs *j, long ms)
{
    struct timespec until;
    bool go_on;

    ms_from_now(&until, ms);
    pthread_mutex_lock(&j->lock);
    while (!j->stop && !j->work &&
           pthread_cond_timedwait(&j->wake, &j->lock, &until) != ETIMEDOUT) {
    }
    j->work = false;
    go_on = !j->stop;
    pthread_mutex_unlock(&j->lock);
    return go_on;
}

static bool stopping(replay_jobs *j)
{
    bool s;

    pthread_mutex_lock(&j->lock);
    s = j->stop;
    pthread_mutex_unlock(&j->lock);
    return s;
}

/* A statement with text parameters on the thread's connection; its rows into *@res (owned). */
static gw_err run(replay_jobs *j, const char *what, const char *sql, int n, const char *const *p,
                  PGresult **res)
{
    PGresult *r = PQexecParams(db_pg(j->db), sql, n, NULL, p, NULL, NULL, 0);
    ExecStatusType want = PQresultStatus(r) == PGRES_TUPLES_OK ? PGRES_TUPLES_OK : PGRES_COMMAND_OK;
    gw_err err = db_check(r, want, what);

    if (err == GW_OK && res != NULL)
        *res = r;
    else
        PQclear(r);
    return err;
}

static gw_err record(replay_jobs *j, const char *job, const char *letter, const char *result,
                     const char *detail)
{
    const char *p[4] = {job, letter, result, detail};

    return run(j, "replay_job_letter",
               "UPDATE replay_job_letters SET result = $3, detail = $4, at = now() "
               "WHERE job_id = $1::bigint AND letter_id = $2::bigint",
               4, p, NULL);
}

/* The letters replayed in one transaction and one confirm round: a tenth of a second's worth. */
static int batch_size(const replay_jobs *j)
{
    int b = j->cfg->replay_rate / 10;

    return b < 1 ? 1 : b > BATCH_MAX ? BATCH_MAX : b;
}

/* Pace: wait for @next, then set it @n letters' time (n/rate) later. */
static void pace(replay_jobs *j, struct timespec *next, int n)
{
    struct timespec now;
    long long gap_ns = 1000000000LL * n / j->cfg->replay_rate;

    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec < next->tv_sec || (now.tv_sec == next->tv_sec && now.tv_nsec < next->tv_nsec)) {
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL);
        now = *next;
    }
    gap_ns += now.tv_nsec;
    next->tv_sec = now.tv_sec + (time_t)(gap_ns / 1000000000LL);
    next->tv_nsec = (long)(gap_ns % 1000000000LL);
}

/* One letter of @job, tried until it has a result or we stop; false: stop (or the database
 * went away before the result could be recorded: the letter stays open for the next round). */
static bool work_letter(replay_jobs *j, const char *job, const char *by, const char *letter)
{
    char why[240], event_id[128];
    dlq_replay_result res = DLQ_REPLAY_DB_DOWN;

    for (int t = 1; t <= TRIES_PER_LETTER; t++) {
        if (db_ensure(j->db) != GW_OK)
            return false;
        res = dlq_replay_one(j->dlq, j->db, letter, by, job, event_id, sizeof event_id, why,
                             sizeof why);
        if (res == DLQ_REPLAYED) /* its result was written in the replay's transaction */
            return true;
        if (res != DLQ_REPLAY_BROKER_DOWN && res != DLQ_REPLAY_DB_DOWN)
            break;
        log_warn("replay_job_letter_retry", "job=%s letter=%s try=%d why=\"%s\"", job, letter, t,
                 why);
        if (!pause_ms(j, 1000L * t))
            return false;
    }
    return record(j, job, letter, dlq_replay_result_name(res), why) == GW_OK;
}

/*
 * The @n letters @ids of @job: as one batch, or one by one when the batch could not be
 * recorded. False: stop (or the database went away: the letters stay open for later).
 */
static bool work_batch(replay_jobs *j, const char *job, const char *by, const char *const *ids,
                       int n)
{
    dlq_replay_result res[BATCH_MAX];

    if (db_ensure(j->db) == GW_OK &&
        dlq_replay_batch(j->dlq, j->db, ids, (size_t)n, by, job, res)) {
        for (int i = 0; i < n; i++) /* a replayed letter's result was written with it */
            if (res[i] != DLQ_REPLAYED &&
                record(j, job, ids[i], dlq_replay_result_name(res[i]), "") != GW_OK)
                return false;
        return true;
    }
    for (int i = 0; i < n; i++)
        if (stopping(j) || !work_letter(j, job, by, ids[i]))
            return false;
    return true;
}

/* Work the open job @job until no letter is left without a result. */
static void work_job(replay_jobs *j, const char *job, const char *by)
{
    const char *p[1] = {job}, *ids[BATCH_MAX];
    int b = batch_size(j), n;
    struct timespec next;
    PGresult *res;

    clock_gettime(CLOCK_MONOTONIC, &next);
    if (run(j, "replay_job_running", "UPDATE replay_jobs SET status = 'running' WHERE id = $1", 1,
            p, NULL) != GW_OK)
        return;
    log_info("replay_job_started", "job=%s by=%s batch=%d", job, by, b);
    for (;;) {
        if (run(j, "replay_job_next",
                "SELECT letter_id FROM replay_job_letters WHERE job_id = $1::bigint "
                "AND result IS NULL ORDER BY letter_id LIMIT 500",
                1, p, &res) != GW_OK)
            return;
        n = PQntuples(res);
        for (int at = 0; at < n; at += b) {
            int k = n - at < b ? n - at : b;
            for (int i = 0; i < k; i++)
                ids[i] = PQgetvalue(res, at + i, 0);
            pace(j, &next, k);
            if (stopping(j) || !work_batch(j, job, by, ids, k)) {
                PQclear(res);
                return;
            }
        }
        PQclear(res);
        if (n == 0)
            break;
    }
    if (run(j, "replay_job_done",
            "UPDATE replay_jobs SET status = 'done', finished_at = now() WHERE id = $1", 1, p,
            NULL) == GW_OK)
        log_info("replay_job_done", "job=%s by=%s", job, by);
}

static void *jobs_main(void *arg)
{
    replay_jobs *j = arg;
    PGresult *res;

    while (!stopping(j)) {
        if (db_ensure(j->db) != GW_OK ||
            run(j, "replay_job_open",
                "SELECT id, requested_by FROM replay_jobs WHERE status <> 'done' "
                "ORDER BY id LIMIT 1",
                0, NULL, &res) != GW_OK) {
            pause_ms(j, IDLE_POLL_MS);
            continue;
        }
        if (PQntuples(res) == 0) {
            PQclear(res);
            pause_ms(j, IDLE_POLL_MS);
            continue;
        }
        work_job(j, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
        PQclear(res);
    }
    return NULL;
}

gw_err replay_jobs_start(const gw_config *cfg, dlq *d, db_pool *pool, api_metrics *m,
                         replay_jobs **out)
{
    replay_jobs *j = calloc(1, sizeof *j);
    gw_err err;

    if (j == NULL)
        return GW_ERR_NOMEM;
    j->cfg = cfg;
    j->dlq = d;
    j->pool = pool;
    j->metrics = m;
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->wake, NULL);
    if ((err = db_open(cfg->database_url, "payments-api-replay", NULL, 0, true, &j->db)) != GW_OK) {
        replay_jobs_stop(j);
        return err;
    }
    if (pthread_create(&j->thread, NULL, jobs_main, j) != 0) {
        db_close(j->db);
        j->db = NULL;
        replay_jobs_stop(j);
        return GW_ERR_NOMEM;
    }
    *out = j;
    return GW_OK;
}

void replay_jobs_stop(replay_jobs *j)
{
    if (j == NULL)
        return;
    if (j->db != NULL) { /* the thread runs */
        pthread_mutex_lock(&j->lock);
        j->stop = true;
        pthread_cond_signal(&j->wake);
        pthread_mutex_unlock(&j->lock);
        pthread_join(j->thread, NULL);
        db_close(j->db);
    }
    pthread_cond_destroy(&j->wake);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

/* ---------------------------------------------------------------- HTTP */

static void reply_db_unavailable(replay_jobs *j, http_request *r)
{
    problem_reply_unavailable(r, j->metrics, "the database is unavailable");
}

/* The selection of @body as a bigint[] literal into *@ids (owned), or its group into @group. */
static bool parse_selector(replay_jobs *j, http_request *r, const json_t *body, char **ids,
                           const char **group)
{
    const json_t *list = json_object_get(body, "ids"), *g = json_object_get(body, "group"), *v;
    size_t i, len = 1;

    *ids = NULL;
    *group = NULL;
    if (!json_is_object(body) || json_object_size(body) != 1 || (list == NULL) == (g == NULL)) {
        problem_reply_invalid(r, j->metrics, "", "send {\"ids\": [...]} or {\"group\": \"<key>\"}");
        return false;
    }
    if (g != NULL) {
        if (!json_is_string(g) || json_string_length(g) == 0 || json_string_length(g) > 64) {
            problem_reply_invalid(r, j->metrics, "/group",
                                  "group must be a group's key from /admin/dlq/groups");
            return false;
        }
        *group = json_string_value(g);
        return true;
    }
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > IDS_MAX) {
        problem_reply_invalid(r, j->metrics, "/ids", "ids must list 1..1000 dead letter ids");
        return false;
    }
    *ids = malloc(json_array_size(list) * 21 + 3);
    if (*ids == NULL) {
        problem_reply(r, j->metrics, 500, "internal-error", "Internal Error", "out of memory", NULL,
                      NULL);
        return false;
    }
    (*ids)[0] = '{';
    json_array_foreach(list, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            free(*ids);
            *ids = NULL;
            problem_reply_invalid(r, j->metrics, "/ids",
                                  "every id must be a dead letter's id, a positive integer");
            return false;
        }
        len += (size_t)sprintf(*ids + len, "%s%" JSON_INTEGER_FORMAT, i ? "," : "",
                               json_integer_value(v));
    }
    strcpy(*ids + len, "}");
    return true;
}

/* In @db's transaction: the job and its letters; its id into @id and size into *@total. */
static gw_err insert_job(db_conn *db, const char *operator, const char * selector, const char *ids,
                         const char *group, char *id, long *total, long *unknown)
{
    const char *p[3] = {operator, selector, NULL};
    PGresult *res;
    gw_err err;

    res = PQexecParams(db_pg(db),
                       "INSERT INTO replay_jobs (requested_by, selector, total) "
                       "VALUES ($1, $2::jsonb, 0) RETURNING id",
                       2, NULL, p, NULL, NULL, 0);
    if ((err = db_check(res, PGRES_TUPLES_OK, "replay_job_insert")) == GW_OK)
        snprintf(id, 24, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    if (err != GW_OK)
        return err;
    /* a group: its letters not replayed yet; a selection: every id given that exists (one
     * replayed before gets already_replayed, so the operator sees it) */
    p[0] = id;
    p[1] = group;
    p[2] = ids;
    res = PQexecParams(db_pg(db),
                       "WITH l AS (INSERT INTO replay_job_letters (job_id, letter_id) "
                       "SELECT $1::bigint, id FROM dead_letters WHERE "
                       "CASE WHEN $2::text IS NOT NULL THEN group_key = $2 AND replayed_at IS NULL "
                       "ELSE id = ANY($3::bigint[]) END RETURNING 1), "
                       "u AS (UPDATE replay_jobs SET total = (SELECT count(*) FROM l) "
                       "WHERE id = $1::bigint) "
                       "SELECT (SELECT count(*) FROM l), "
                       "coalesce(cardinality($3::bigint[]) - (SELECT count(*) FROM l), 0)",
                       3, NULL, p, NULL, NULL, 0);
    if ((err = db_check(res, PGRES_TUPLES_OK, "replay_job_letters_insert")) == GW_OK) {
        *total = strtol(PQgetvalue(res, 0, 0), NULL, 10);
        *unknown = strtol(PQgetvalue(res, 0, 1), NULL, 10);
    }
    PQclear(res);
    return err;
}

void replay_jobs_create(replay_jobs *j, http_request *r, const char *operator)
{
    size_t len = 0;
    const char *buf = http_request_body(r, &len), *group;
    char why[160], id[24], *ids = NULL, *selector = NULL;
    json_t *body = NULL;
    long total = 0, unknown = 0;
    bool committed = false;
    db_conn *db = NULL;
    gw_err err;

    if (json_strict_parse(buf, len, JSON_STRICT_MAX_DEPTH, &body, why, sizeof why) != GW_OK) {
        problem_reply(r, j->metrics, 400, "malformed-json", "Malformed JSON", why, NULL, NULL);
        return;
    }
    if (!parse_selector(j, r, body, &ids, &group))
        goto out;
    selector = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    if (db_pool_acquire(j->pool, POOL_WAIT_MS, &db) != GW_OK) {
        reply_db_unavailable(j, r);
        goto out;
    }
    if ((err = db_begin(db, NULL)) == GW_OK &&
        (err = insert_job(db, operator, selector, ids, group, id, &total, &unknown)) == GW_OK &&
        unknown == 0 && total > 0)
        committed = (err = db_commit(db)) == GW_OK;
    else
        db_rollback(db);
    db_pool_release(j->pool, db);
    if (err != GW_OK) {
        reply_db_unavailable(j, r);
    } else if (unknown != 0) {
        problem_reply_invalid(r, j->metrics, "/ids", "some ids are not dead letters");
    } else if (!committed) {
        problem_reply_invalid(r, j->metrics, "/group", "the group has no letter left to replay");
    } else {
        pthread_mutex_lock(&j->lock);
        j->work = true;
        pthread_cond_signal(&j->wake);
        pthread_mutex_unlock(&j->lock);
        log_info("replay_job_created", "request_id=%s job=%s by=%s letters=%ld", http_request_id(r),
                 id, operator, total);
        http_reply_json(r, 202,
                        json_pack("{s:I,s:s,s:I}", "id", (json_int_t)strtoll(id, NULL, 10),
                                  "status", "queued", "total", (json_int_t)total),
                        NULL);
    }
out:
    free(selector);
    free(ids);
    json_decref(body);
}

#define JOB_COLUMNS                                                                                \
    "j.id, j.requested_by, " PG_JSON_TIME(                                                         \
        "j.requested_at") ", j.selector::text, j.status, j.total, "                                \
                          "(SELECT count(result) FROM replay_job_letters l WHERE l.job_id = "      \
                          "j.id), "                                                                \
                          "(SELECT count(*) FROM replay_job_letters l WHERE l.job_id = j.id "      \
                          "AND l.result = 'replayed'), "                                           \
                          "(SELECT count(*) FROM replay_job_letters l WHERE l.job_id = j.id "      \
                          "AND l.result <> 'replayed'), " PG_JSON_TIME("j.finished_at")

static json_t *job_json(const PGresult *res, int row)
{
    json_t *selector = json_loads(PQgetvalue(res, row, 3), 0, NULL);

    return json_pack("{s:I,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:I,s:o}", "id", pg_json_int(res, row, 0),
                     "requested_by", pg_json_text(res, row, 1), "requested_at",
                     pg_json_text(res, row, 2), "selector",
                     selector != NULL ? selector : json_null(), "status", pg_json_text(res, row, 4),
                     "total", pg_json_int(res, row, 5), "done", pg_json_int(res, row, 6),
                     "replayed", pg_json_int(res, row, 7), "failed", pg_json_int(res, row, 8),
                     "finished_at", pg_json_text(res, row, 9));
}

void replay_jobs_list(replay_jobs *j, http_request *r)
{
    db_conn *db = NULL;
    PGresult *res;
    json_t *items;

    if (db_pool_acquire(j->pool, POOL_WAIT_MS, &db) != GW_OK) {
        reply_db_unavailable(j, r);
        return;
    }
    res = PQexec(db_pg(db),
                 "SELECT " JOB_COLUMNS " FROM replay_jobs j ORDER BY j.id DESC LIMIT " JOBS_LISTED);
    db_pool_release(j->pool, db);
    if (db_check(res, PGRES_TUPLES_OK, "replay_jobs_list") != GW_OK) {
        PQclear(res);
        reply_db_unavailable(j, r);
        return;
    }
    items = json_array();
    for (int i = 0; i < PQntuples(res); i++)
        json_array_append_new(items, job_json(res, i));
    PQclear(res);
    http_reply_json(r, 200, json_pack("{s:o}", "items", items), NULL);
}

void replay_jobs_get(replay_jobs *j, http_request *r, const char *id)
{
    const char *after_s = http_request_query(r, "after"), *limit_s = http_request_query(r, "limit");
    char lim[24];
    const char *p[3] = {id, after_s != NULL ? after_s : "0", lim};
    long v, limit = LETTERS_PAGE, after = 0;
    PGresult *job, *letters = NULL;
    json_t *items, *next;
    db_conn *db = NULL;
    int n;

    if (!params_long(id, 1, INT64_MAX, &v)) {
        problem_reply(r, j->metrics, 404, "not-found", "Not Found", "no such replay job", NULL,
                      NULL);
        return;
    }
    if (limit_s != NULL && !params_long(limit_s, 1, LETTERS_MAX, &limit)) {
        problem_reply_invalid(r, j->metrics, "/limit", "limit must be an integer in 1..1000");
        return;
    }
    if (after_s != NULL && !params_long(after_s, 1, INT64_MAX, &after)) {
        problem_reply_invalid(r, j->metrics, "/after",
                              "after must be the next cursor of a previous page");
        return;
    }
    snprintf(lim, sizeof lim, "%ld", limit + 1);
    if (db_pool_acquire(j->pool, POOL_WAIT_MS, &db) != GW_OK) {
        reply_db_unavailable(j, r);
        return;
    }
    job =
        PQexecParams(db_pg(db), "SELECT " JOB_COLUMNS " FROM replay_jobs j WHERE j.id = $1::bigint",
                     1, NULL, p, NULL, NULL, 0);
    if (db_check(job, PGRES_TUPLES_OK, "replay_job_get") == GW_OK && PQntuples(job) == 1)
        letters =
            PQexecParams(db_pg(db),
                         "SELECT letter_id, result, detail, " PG_JSON_TIME(
                             "at") " "
                                   "FROM replay_job_letters WHERE job_id = $1::bigint "
                                   "AND letter_id > $2::bigint ORDER BY letter_id LIMIT $3::int",
                         3, NULL, p, NULL, NULL, 0);
    db_pool_release(j->pool, db);
    if (PQresultStatus(job) != PGRES_TUPLES_OK ||
        (PQntuples(job) == 1 &&
         db_check(letters, PGRES_TUPLES_OK, "replay_job_letters") != GW_OK)) {
        reply_db_unavailable(j, r);
    } else if (PQntuples(job) == 0) {
        problem_reply(r, j->metrics, 404, "not-found", "Not Found", "no such replay job", NULL,
                      NULL);
    } else {
        items = json_array();
        n = PQntuples(letters);
        for (int i = 0; i < n && i < limit; i++)
            json_array_append_new(
                items, json_pack("{s:I,s:o,s:o,s:o}", "letter_id", pg_json_int(letters, i, 0),
                                 "result", pg_json_text(letters, i, 1), "detail",
                                 pg_json_text(letters, i, 2), "at", pg_json_text(letters, i, 3)));
        next = n > limit ? json_string(PQgetvalue(letters, (int)limit - 1, 0)) : json_null();
        http_reply_json(
            r, 200,
            json_pack("{s:o,s:o,s:o}", "job", job_json(job, 0), "letters", items, "next", next),
            NULL);
    }
    PQclear(job);
    PQclear(letters);
}
