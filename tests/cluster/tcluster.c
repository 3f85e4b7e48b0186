/* tests/cluster/tcluster.c - the cluster suite's fixture (tests/cluster/tcluster.h) */
#include "tests/cluster/tcluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

#define MAX_EXTRA 8

bool tcluster_start(tcluster *c, te2e *e, const char *label, const char *const *extra)
{
    char amqp[1200], name[96];
    const char *env[MAX_EXTRA + 3] = {"QUEUE_TYPE=quorum"};
    int n = 1;

    c->e = e;
    for (; extra != NULL && extra[n - 1] != NULL && n < MAX_EXTRA; n++)
        env[n] = extra[n - 1];
    env[n] = NULL;
    snprintf(amqp, sizeof amqp, "AMQP_URL=%s", e->amqp_url);
    snprintf(name, sizeof name, "%s-relay", label);
    if (!CHECK(tprog_start(&c->relay, TPROG_RELAY, name, e, env)))
        return false;
    snprintf(name, sizeof name, "%s-worker", label);
    if (!CHECK(tprog_start(&c->worker, TPROG_WORKER, name, e, env)))
        return false;
    env[n++] = amqp;
    env[n] = NULL;
    snprintf(name, sizeof name, "%s-api", label);
    return CHECK(tapi_start(&c->api, name, tdb_url(e->db), env));
}

void tcluster_stop(tcluster *c)
{
    tapi_stop(&c->api);
    tprog_stop(&c->relay, 0);
    tprog_stop(&c->worker, 0);
}

void tcluster_guard(tguard *g, const char *what)
{
    g->what = what;
    g->pid = tstack_guard_start(what, &g->fd);
}

void tcluster_finish(tcluster *c, tguard *g)
{
    tcluster_stop(c);
    if (g->pid > 0) {
        tstack_run("start", g->what);
        tstack_guard_done(g->pid, g->fd);
    }
}

int tcluster_leader(const te2e *e, const char *queue)
{
    const char *args[] = {"leader", queue, e->vhost, NULL};
    char out[32] = "";

    if (tstack_capture(args, out, sizeof out) != 0)
        return -1;
    return atoi(out);
}

bool tcluster_node(const char *verb, int k)
{
    return tcluster_server(verb, "broker", k);
}

bool tcluster_server(const char *verb, const char *kind, int k)
{
    char what[32];
    long long t0 = tproc_now_ms();
    int rc;

    snprintf(what, sizeof what, "%s-%d", kind, k);
    rc = tstack_run(verb, what);
    printf("%s %s: status %d in %.1f s\n", verb, what, rc, te2e_elapsed_s(t0));
    return rc == 0;
}

static void *stream_main(void *arg)
{
    tstream *s = arg;
    long long t0 = tproc_now_ms();

    while (!atomic_load(&s->stop)) {
        int i = atomic_fetch_add(&s->sent, 1) + 1;
        char id[64], *body;
        thttp_resp r;

        snprintf(id, sizeof id, "%s-%d", s->prefix, i);
        body = tapi_payment(id, id);
        if (!tapi_post(s->api, body, NULL, &r))
            atomic_fetch_add(&s->other, 1);
        else if (r.status == 202)
            atomic_fetch_add(&s->accepted, 1);
        else if (r.status == 503)
            atomic_fetch_add(&s->unavailable, 1);
        else
            atomic_fetch_add(&s->other, 1);
        thttp_resp_free(&r);
        free(body);
        /* pace: the i-th post is due at i / per_s seconds */
        long long due = t0 + (long long)i * 1000 / s->per_s, now = tproc_now_ms();
        if (due > now)
            tproc_sleep_ms((int)(due - now));
    }
    return NULL;
}

bool tstream_start(tstream *s, const tapi *api, const char *prefix, int per_s)
{
    s->api = api;
    s->prefix = prefix;
    s->per_s = per_s;
    atomic_init(&s->stop, false);
    atomic_init(&s->sent, 0);
    atomic_init(&s->accepted, 0);
    atomic_init(&s->unavailable, 0);
    atomic_init(&s->other, 0);
    return CHECK(pthread_create(&s->thread, NULL, stream_main, s) == 0);
}

void tstream_stop(tstream *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    printf("stream %s: %d sent, %d accepted, %d answered 503, %d other\n", s->prefix,
           atomic_load(&s->sent), atomic_load(&s->accepted), atomic_load(&s->unavailable),
           atomic_load(&s->other));
}

void tcluster_check_once(tdb *db, const char *prefix, long long accepted, int timeout_ms)
{
    char like[80], sql[600], acc[32];
    long long t0 = tproc_now_ms(), settled;

    snprintf(like, sizeof like, "%s-%%", prefix);
    snprintf(acc, sizeof acc, "%lld", accepted);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM payments WHERE payment_id LIKE '%s' AND status = 'settled'",
             like);
    settled = te2e_wait_long(db, sql, accepted, timeout_ms, 200);
    printf("%lld of %lld accepted payments settled, %.1f s after the stream ended\n", settled,
           accepted, te2e_elapsed_s(t0));
    CHECK_INT(settled, accepted);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM payments WHERE payment_id LIKE $1", like, NULL),
              accepted);
    /* exactly one debit and one credit per event: no effect lost, none applied twice */
    CHECK_INT(tdb_long(db,
                       "SELECT count(*) FROM (SELECT event_id FROM ledger_entries "
                       "WHERE payment_id LIKE $1 GROUP BY event_id "
                       "HAVING count(*) FILTER (WHERE side = 'debit') = 1 "
                       "AND count(*) FILTER (WHERE side = 'credit') = 1 AND count(*) = 2) s",
                       like, NULL),
              accepted);
    CHECK_INT(
        tdb_long(db, "SELECT count(*) FROM ledger_entries WHERE payment_id LIKE $1", like, NULL),
        2 * accepted);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM inbox WHERE event_id LIKE $1", like, NULL),
              accepted);
    CHECK_INT(tdb_long(db,
                       "SELECT count(*) FROM payments WHERE payment_id LIKE $1 "
                       "AND status = 'dead_lettered'",
                       like, NULL),
              0);
}
