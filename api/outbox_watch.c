/* api/outbox_watch.c - one thread, one connection: the backlog estimate, the key expiry's clock */
#include "api/outbox_watch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "api/key_expiry.h"
#include "shared/lib/crew.h"
#include "shared/lib/log.h"
#include "shared/pg/db.h"

struct outbox_watch {
    crew crew; /* one thread; its lock holds its stop */
    atomic_bool over_limit;
    long max_backlog;
    key_expiry expiry; /* ticked by each refresh */
    api_metrics *m;
    db_stmt stmts[2]; /* the backlog's and the key expiry's; prepared on db */
    db_conn *db;
};

/* counted up to $1: whether there are more than the limit is all back-pressure needs (sql/0021) */
static const db_stmt backlog_stmt = {
    "backlog", "SELECT pending, oldest_age_seconds FROM outbox_backlog($1::bigint)"};

static void refresh_backlog(outbox_watch *w)
{
    char lim[24];
    const char *params[1] = {lim};
    PGresult *res;
    long pending;

    if (db_ensure(w->db) != GW_OK)
        return; /* keep the last estimate: accepts fail on their own while the DB is down */
    snprintf(lim, sizeof lim, "%ld", w->max_backlog + 1);
    res = db_prepared(w->db, "backlog", 1, params);
    if (db_check(res, PGRES_TUPLES_OK, "backlog") == GW_OK) {
        pending = atol(PQgetvalue(res, 0, 0));
        metrics_set(w->m->outbox_backlog, (double)pending);
        metrics_set(w->m->outbox_oldest_age, atof(PQgetvalue(res, 0, 1)));
        if ((pending > w->max_backlog) != atomic_load(&w->over_limit))
            log_warn("outbox_backlog", "pending=%ld limit=%ld backpressure=%s", pending,
                     w->max_backlog, pending > w->max_backlog ? "on" : "off");
        atomic_store(&w->over_limit, pending > w->max_backlog);
    }
    PQclear(res);
    key_expiry_tick(&w->expiry, w->db);
}

static void *watch_main(void *arg)
{
    outbox_watch *w = arg;
    struct timespec next;

    pthread_mutex_lock(&w->crew.lock);
    while (!w->crew.stopping) {
        pthread_mutex_unlock(&w->crew.lock);
        refresh_backlog(w);
        pthread_mutex_lock(&w->crew.lock);
        clock_gettime(CLOCK_REALTIME, &next);
        next.tv_sec += 1;
        while (!w->crew.stopping &&
               pthread_cond_timedwait(&w->crew.wake, &w->crew.lock, &next) == 0)
            ;
    }
    pthread_mutex_unlock(&w->crew.lock);
    return NULL;
}

gw_err outbox_watch_start(const char *url, long max_backlog, api_metrics *m, outbox_watch **out)
{
    outbox_watch *w = calloc(1, sizeof *w);
    gw_err err;

    if (w == NULL)
        return GW_ERR_NOMEM;
    w->stmts[0] = backlog_stmt;
    w->stmts[1] = key_expiry_stmt;
    atomic_init(&w->over_limit, false);
    w->max_backlog = max_backlog;
    w->m = m;
    crew_init(&w->crew); /* first, so that outbox_watch_stop() can undo any step below */
    err = db_open(url, "payments-api-watch", w->stmts, sizeof w->stmts / sizeof w->stmts[0], true,
                  &w->db);
    if (err == GW_OK && !crew_add(&w->crew, watch_main, w))
        err = GW_ERR_NOMEM;
    return GW_BUILT(err, w, outbox_watch_stop, out);
}

void outbox_watch_stop(outbox_watch *w)
{
    if (w == NULL)
        return;
    crew_stop(&w->crew);
    db_close(w->db);
    crew_deinit(&w->crew);
    free(w);
}

bool outbox_watch_over_limit(const outbox_watch *w)
{
    return atomic_load(&((outbox_watch *)w)->over_limit);
}
