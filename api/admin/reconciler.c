/* api/admin/reconciler.c - GET /admin/reconciliation: requests wait suspended, one thread
 * reports */
#include "api/admin/reconciler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/admin/reconcile.h"
#include "api/problem.h"
#include "shared/lib/log.h"

#define WAITING_MAX 64 /* requests waiting for the next report; more: 503 */

/* One request's wait; freed when the request ends (the request outlives it). */
typedef struct report_wait {
    struct report_wait *next; /* under the reconciler's lock until taken */
    http_request *r;          /* borrowed */
    bool full;
    char *body; /* the report once resumed; NULL: the database did not answer */
} report_wait;

struct reconciler {
    const gw_config *cfg;
    api_metrics *metrics;
    db_conn *db; /* the thread's own */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    PGcancel *cancel;     /* under lock: the report running, for a stop */
    bool stop;            /* under lock */
    report_wait *waiting; /* under lock */
    int n_waiting;        /* under lock */
};

static void wait_free(void *arg)
{
    report_wait *w = arg;

    free(w->body);
    free(w);
}

/* Hand each of @list its copy of @body (NULL: failed) and let its handler run again. */
static void answer_all(report_wait *list, const char *body)
{
    while (list != NULL) {
        report_wait *next = list->next;

        list->body = body != NULL ? strdup(body) : NULL;
        http_request_resume(list->r); /* list is the request's now: not touched again */
        list = next;
    }
}

static void *reconciler_main(void *arg)
{
    reconciler *rc = arg;

    for (;;) {
        report_wait *list;
        json_t *rep = NULL;
        char *body = NULL;
        bool full = false;

        pthread_mutex_lock(&rc->lock);
        while (!rc->stop && rc->waiting == NULL)
            pthread_cond_wait(&rc->wake, &rc->lock);
        list = rc->waiting;
        rc->waiting = NULL;
        rc->n_waiting = 0;
        if (rc->stop) {
            pthread_mutex_unlock(&rc->lock);
            answer_all(list, NULL);
            return NULL;
        }
        pthread_mutex_unlock(&rc->lock);

        for (report_wait *w = list; w != NULL; w = w->next)
            full |= w->full; /* a full report answers a windowed request too */
        if (db_ensure(rc->db) == GW_OK) {
            pthread_mutex_lock(&rc->lock);
            rc->cancel = PQgetCancel(db_pg(rc->db));
            pthread_mutex_unlock(&rc->lock);
            if (reconcile_run(rc->db, rc->cfg, full, &rep) == GW_OK) {
                body = json_dumps(rep, JSON_COMPACT);
                json_decref(rep);
            }
            pthread_mutex_lock(&rc->lock);
            PQfreeCancel(rc->cancel);
            rc->cancel = NULL;
            pthread_mutex_unlock(&rc->lock);
        }
        answer_all(list, body);
        free(body);
    }
}

gw_err reconciler_start(const gw_config *cfg, api_metrics *m, reconciler **out)
{
    reconciler *rc = calloc(1, sizeof *rc);
    gw_err err;

    if (rc == NULL)
        return GW_ERR_NOMEM;
    rc->cfg = cfg;
    rc->metrics = m;
    pthread_mutex_init(&rc->lock, NULL);
    pthread_cond_init(&rc->wake, NULL);
    if ((err = db_open(cfg->database_url, "payments-api-reconcile", NULL, 0, true, &rc->db)) !=
        GW_OK) {
        reconciler_stop(rc);
        return err;
    }
    if (pthread_create(&rc->thread, NULL, reconciler_main, rc) != 0) {
        db_close(rc->db);
        rc->db = NULL;
        reconciler_stop(rc);
        return GW_ERR_NOMEM;
    }
    *out = rc;
    return GW_OK;
}

void reconciler_stop(reconciler *rc)
{
    if (rc == NULL)
        return;
    if (rc->db != NULL) { /* the thread runs */
        char why[256];

        pthread_mutex_lock(&rc->lock);
        rc->stop = true;
        if (rc->cancel != NULL && !PQcancel(rc->cancel, why, sizeof why)) /* a full report */
            log_warn("reconciliation_cancel_failed", "error=\"%s\"", why);
        pthread_cond_signal(&rc->wake);
        pthread_mutex_unlock(&rc->lock);
        pthread_join(rc->thread, NULL);
        db_close(rc->db);
    }
    pthread_cond_destroy(&rc->wake);
    pthread_mutex_destroy(&rc->lock);
    free(rc);
}

void reconciler_request(reconciler *rc, http_request *r)
{
    report_wait *w = http_request_state(r);
    const char *full = http_request_query(r, "full");

    if (w != NULL) { /* second call: the thread has resumed us, the body set */
        if (w->body != NULL)
            http_reply(r, 200, "application/json", w->body, strlen(w->body), NULL);
        else
            problem_reply_unavailable(r, rc->metrics, "the database is unavailable");
        return;
    }
    if (full != NULL && strcmp(full, "true") != 0 && strcmp(full, "false") != 0) {
        problem_reply_invalid(r, rc->metrics, "/full", "full must be true or false");
        return;
    }
    if ((w = calloc(1, sizeof *w)) == NULL) {
        problem_reply(r, rc->metrics, 500, "internal-error", "Internal Error", "out of memory",
                      NULL, NULL);
        return;
    }
    w->r = r;
    w->full = full != NULL && strcmp(full, "true") == 0;
    pthread_mutex_lock(&rc->lock);
    if (rc->stop || rc->n_waiting >= WAITING_MAX) {
        pthread_mutex_unlock(&rc->lock);
        free(w);
        problem_reply_unavailable(r, rc->metrics, "too many reports are waiting; retry later");
        return;
    }
    http_request_set_state(r, w, wait_free);
    http_request_suspend(r); /* before the thread can take it and resume it */
    w->next = rc->waiting;
    rc->waiting = w;
    rc->n_waiting++;
    pthread_cond_signal(&rc->wake);
    pthread_mutex_unlock(&rc->lock);
}
