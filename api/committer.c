/* api/committer.c - a queue, a few threads, one COMMIT per batch */
#include "api/committer.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "shared/config.h"
#include "shared/failpoint.h"
#include "shared/lib/canon.h"
#include "shared/lib/crew.h"
#include "shared/lib/deadline.h"
#include "shared/lib/json_out.h"
#include "shared/lib/log.h"
#include "shared/lib/names.h"
#include "shared/outbox.h"
#include "shared/pg/db.h"

#define MAX_THREADS CONFIG_MAX_COMMIT_THREADS
_Static_assert(MAX_THREADS <= CREW_MAX, "one crew runs every commit thread");
/*
 * A second batch starts while one is committing only when this many jobs wait,
 * or when the one in flight has taken OVERLAP_AFTER_NS (a slow or stuck COMMIT
 * must not hold the others). Otherwise they ride on the next COMMIT together: a
 * COMMIT per job or two would spend the CPU a loaded machine needs, and the jobs
 * would wait for the disk anyway.
 */
#define OVERLAP_MIN      16
#define OVERLAP_AFTER_NS 5000000L
/*
 * A batch smaller than OVERLAP_MIN waits up to LINGER_NS for company before its
 * BEGIN. A commit costs about as much CPU as several accepts; at a moderate rate
 * the lone requests of a few hundred microseconds would each pay for one.
 */
#define LINGER_NS 1000000L

struct committer {
    crew crew;               /* its lock guards what is marked "under lock"; wake: work or a stop */
    accept_job *head, *tail; /* under lock */
    int queued;              /* under lock: jobs from head to tail */
    int in_flight;           /* under lock: batches between BEGIN and their answers */
    struct timespec flight_start; /* under lock: since when the batch(es) in flight hold the rest */
    int max_batch;
    metric *batch_size; /* borrowed */
    metric *wakeups;    /* borrowed: the relay's wake-ups that committed */
    db_conn *db[MAX_THREADS];
};

/*
 * DB_SYNC_WRITE: every batch writes WAL, so its COMMIT waits for the synchronous
 * standby even when it only replays answers. A replay read a row that may be
 * committed here and on no standby (a COMMIT whose wait was cancelled); its 202
 * must wait until the standby holds that row too (docs/decisions.md, 22).
 */
static const db_stmt committer_stmts[] = {
    {"accept_batch", "SELECT idx, outcome, response_body FROM accept_batch($1::jsonb), "
                     "(" DB_SYNC_WRITE ") AS sync"},
    /* after the COMMIT, in the same round trip: a transaction of its own, which writes no WAL
     * and so waits for neither the disk nor a standby (decision 4) */
    {"wake_relay", "SELECT pg_notify('" OUTBOX_NOTIFY_CHANNEL "', '')"},
};

typedef struct worker_arg {
    committer *c;
    int i;
} worker_arg;

/* accept_batch()'s outcome column, by outcome. */
static const char *const outcome_names[] = {
    [OUTCOME_ACCEPTED] = "accepted",
    [OUTCOME_REPLAY] = "replay",
    [OUTCOME_KEY_REUSED] = "key_reused",
    [OUTCOME_IN_FLIGHT] = "in_flight",
    [OUTCOME_PAYMENT_DECIDED] = "payment_decided",
};

/* @j as one element of accept_batch()'s array (sql/: its jsonb argument) */
static void job_out(json_out *o, const accept_job *j)
{
    uint8_t fp[CANON_FINGERPRINT_LEN];
    char hex[2 * CANON_FINGERPRINT_LEN + 1];

    canon_fingerprint(j->canon, strlen(j->canon), fp);
    sodium_bin2hex(hex, sizeof hex, fp, sizeof fp);
    json_out_open(o, '{');
    json_out_member(o, "event_id", j->p.event_id);
    json_out_member(o, "payment_id", j->p.payment_id);
    json_out_member(o, "method", j->p.method);
    json_out_member(o, "decision", j->p.decision);
    json_out_key(o, "amount_cents");
    json_out_int(o, j->p.amount_cents);
    json_out_member(o, "currency", j->p.currency);
    json_out_member(o, "payee_bank", j->p.payee_bank);
    json_out_member(o, "payee_account", j->p.payee_account);
    json_out_member(o, "fingerprint", hex);
    json_out_member(o, "body", j->canon);
    json_out_member(o, "response", j->response);
    if (j->p.decided_at[0])
        json_out_member(o, "decided_at", j->p.decided_at);
    if (j->traceparent != NULL)
        json_out_member(o, "traceparent", j->traceparent);
    json_out_close(o, '}');
}

/*
 * try_batch - BEGIN; accept_batch(all); COMMIT. On GW_OK every job has its
 * outcome and everything is committed. On an error every job carries it and
 * none is answered 202: nothing of the batch is committed, or (*@at_commit) the
 * COMMIT's outcome is unknown.
 */
static gw_err try_batch(db_conn *db, accept_job **jobs, int n, bool *at_commit, int *wakeups)
{
    bool woke = false;
    json_out o = {0};
    PGresult *res = NULL;
    char *text = NULL;
    gw_err err;

    json_out_open(&o, '[');
    for (int i = 0; i < n; i++)
        job_out(&o, jobs[i]);
    json_out_close(&o, ']');
    if ((text = json_out_take(&o)) == NULL) {
        err = GW_ERR_NOMEM;
        goto out;
    }
    /* the point before the COMMIT comes before the round trip that carries it: a crash or an
     * error there commits nothing, as it did between the function and its COMMIT */
    if ((err = failpoint_hit("api.before_commit")) != GW_OK || (err = db_ensure(db)) != GW_OK ||
        (err = db_batch_commit_then(db, "accept_batch", text, n, "wake_relay", &res, at_commit,
                                    &woke)) != GW_OK)
        goto out;
    for (int row = 0; row < n; row++) {
        int i = atoi(PQgetvalue(res, row, 0));
        int outcome = NAMES_FIND(outcome_names, PQgetvalue(res, row, 1));

        if (i < 0 || i >= n || outcome < 0) {
            err = GW_ERR_DB; /* committed, but no answer to give: 503, and a retry replays it */
            goto out;
        }
        jobs[i]->outcome = (accept_outcome)outcome;
        snprintf(jobs[i]->answer, sizeof jobs[i]->answer, "%s", PQgetvalue(res, row, 2));
    }
out:
    *wakeups += woke;
    for (int i = 0; i < n; i++)
        jobs[i]->err = err; /* no COMMIT: none of them may get a 202 */
    PQclear(res);
    free(text);
    return err;
}

static int by_payment_id(const void *a, const void *b)
{
    const accept_job *x = *(accept_job *const *)a, *y = *(accept_job *const *)b;

    return strcmp(x->p.payment_id, y->p.payment_id);
}

/*
 * run_batch - the jobs in payment_id order (two batches lock rows in the same
 * order, so they cannot deadlock), in one transaction. When the batch fails
 * while PostgreSQL is still there, each job runs again alone: a bad row never
 * fails its neighbours. A job that fails alone with GW_ERR_CONFLICT (a unique
 * violation) would fail so on every retry: its answer is final (decision 13).
 */
static int run_batch(db_conn *db, accept_job **jobs, int n)
{
    bool at_commit = false;
    int wakeups = 0;

    qsort(jobs, (size_t)n, sizeof *jobs, by_payment_id);
    /* a failed COMMIT is no bad row: it would fail alone as well, and each alone would wait
     * as long (a COMMIT that waited for a standby in vain) */
    if (try_batch(db, jobs, n, &at_commit, &wakeups) == GW_OK || n == 1 || at_commit ||
        PQstatus(db_pg(db)) != CONNECTION_OK)
        return wakeups;
    log_warn("accept_batch_split", "jobs=%d", n);
    for (int i = 0; i < n; i++)
        if (try_batch(db, &jobs[i], 1, &at_commit, &wakeups) != GW_OK)
            log_warn("accept_row_failed", "event_id=%s", jobs[i]->p.event_id);
    return wakeups;
}

/* may_start - under lock: a committer may take the queued jobs now. */
static bool may_start(const committer *c)
{
    struct timespec now, due;

    if (c->head == NULL)
        return false;
    if (c->in_flight == 0 || c->queued >= OVERLAP_MIN)
        return true;
    if (c->in_flight > 1)
        return false;
    clock_gettime(CLOCK_REALTIME, &now);
    due = deadline_after(c->flight_start, OVERLAP_AFTER_NS);
    return deadline_passed(&due, &now);
}

static void *committer_main(void *arg)
{
    worker_arg *wa = arg;
    committer *c = wa->c;
    db_conn *db = c->db[wa->i];
    accept_job **batch = calloc((size_t)c->max_batch, sizeof *batch);

    free(wa);
    if (batch == NULL)
        abort(); /* start-up allocation */
    for (;;) {
        int n = 0;

        pthread_mutex_lock(&c->crew.lock);
        while (!c->crew.stopping && !may_start(c))
            if (c->head == NULL || c->in_flight > 1) {
                pthread_cond_wait(&c->crew.wake, &c->crew.lock);
            } else {
                struct timespec until = deadline_after(c->flight_start, OVERLAP_AFTER_NS);
                pthread_cond_timedwait(&c->crew.wake, &c->crew.lock, &until);
            }
        if (c->head == NULL && c->crew.stopping) {
            pthread_mutex_unlock(&c->crew.lock);
            break;
        }
        if (c->in_flight++ == 0) /* from here on: the other committers leave this batch alone */
            clock_gettime(CLOCK_REALTIME, &c->flight_start);
        if (c->queued < OVERLAP_MIN && !c->crew.stopping) {
            struct timespec until = deadline_in(LINGER_NS);

            while (c->queued < OVERLAP_MIN && !c->crew.stopping &&
                   pthread_cond_timedwait(&c->crew.wake, &c->crew.lock, &until) == 0)
                ;
        }
        /* everything that arrived while the last batch committed rides together */
        while (c->head != NULL && n < c->max_batch) {
            batch[n++] = c->head;
            c->head = c->head->next;
        }
        c->queued -= n;
        if (c->head == NULL)
            c->tail = NULL;
        else if (c->queued >= OVERLAP_MIN)
            pthread_cond_signal(&c->crew.wake); /* more is queued: wake another committer */
        pthread_mutex_unlock(&c->crew.lock);

        metrics_observe(c->batch_size, (double)n);
        metrics_add(c->wakeups, run_batch(db, batch, n));
        log_hold(); /* the batch's lines (api/payments.c, accept_done()) in one write */
        for (int i = 0; i < n; i++)
            batch[i]->done(batch[i]->arg); /* the job may be freed from here on */
        log_release();

        pthread_mutex_lock(&c->crew.lock);
        if (--c->in_flight > 0) /* the other batch's age is not kept: its wait starts now */
            clock_gettime(CLOCK_REALTIME, &c->flight_start);
        if (c->head != NULL)
            pthread_cond_signal(&c->crew.wake); /* what queued meanwhile goes next */
        pthread_mutex_unlock(&c->crew.lock);
    }
    free(batch);
    return NULL;
}

gw_err committer_start(const char *url, int threads, int max_batch, metric *batch_size,
                       metric *wakeups, committer **out)
{
    committer *c;

    if (threads < 1 || threads > MAX_THREADS) { /* config_load() keeps COMMIT_THREADS in range */
        log_error("committer_bad_threads", "threads=%d max=%d", threads, MAX_THREADS);
        return GW_ERR_INVALID;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return GW_ERR_NOMEM;
    c->max_batch = max_batch > 0 ? max_batch : 64;
    c->batch_size = batch_size;
    c->wakeups = wakeups;
    crew_init(&c->crew);
    for (int i = 0; i < threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);

        if (wa == NULL ||
            db_open(url, "payments-api-commit", committer_stmts,
                    sizeof committer_stmts / sizeof committer_stmts[0], true, &c->db[i]) != GW_OK) {
            free(wa);
            committer_stop(c);
            return GW_ERR_NOMEM;
        }
        wa->c = c;
        wa->i = i;
        if (!crew_add(&c->crew, committer_main, wa)) {
            free(wa);
            db_close(c->db[i]);
            c->db[i] = NULL;
            committer_stop(c);
            return GW_ERR_NOMEM;
        }
    }
    *out = c;
    return GW_OK;
}

void committer_stop(committer *c)
{
    if (c == NULL)
        return;
    crew_stop(&c->crew);
    for (int i = 0; i < MAX_THREADS; i++)
        db_close(c->db[i]);
    crew_deinit(&c->crew);
    free(c);
}

void committer_submit(committer *c, accept_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&c->crew.lock);
    if (c->tail)
        c->tail->next = job;
    else
        c->head = job;
    c->tail = job;
    c->queued++;
    /* otherwise the batch in flight wakes a committer when it is done */
    if (c->in_flight == 0)
        pthread_cond_signal(&c->crew.wake);
    else if (c->queued == 1 || c->queued == OVERLAP_MIN)
        /* an idle committer starts watching the batch in flight (OVERLAP_AFTER_NS); a
         * lingering batch is full; or a second batch may start now */
        pthread_cond_broadcast(&c->crew.wake);
    pthread_mutex_unlock(&c->crew.lock);
}
