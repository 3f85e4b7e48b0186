/* tests/dbcluster/tdbc.c - the database cluster suite's fixture (tests/dbcluster/tdbc.h) */
#include "tests/dbcluster/tdbc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cluster/tcluster.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

#define RETRY_PAUSE_MS 100
#define GIVE_UP_MS     30000
#define SLOWEST_MS     10000 /* contract section 11: never a hang of over 10 s */

bool tdbc_start(tdbc *c, te2e *e, const char *label)
{
    char amqp[1200], name[96];
    const char *env[] = {amqp, NULL};

    c->e = e;
    snprintf(amqp, sizeof amqp, "AMQP_URL=%s", e->amqp_url);
    snprintf(name, sizeof name, "%s-relay", label);
    if (!CHECK(tprog_start(&c->relay, TPROG_RELAY, name, e, NULL)))
        return false;
    snprintf(name, sizeof name, "%s-worker", label);
    if (!CHECK(tprog_start(&c->worker, TPROG_WORKER, name, e, NULL)))
        return false;
    snprintf(name, sizeof name, "%s-api", label);
    return CHECK(tapi_start(&c->api, name, tdb_url(e->db), env));
}

void tdbc_stop(tdbc *c)
{
    tapi_stop(&c->api);
    tprog_stop(&c->relay, 0);
    tprog_stop(&c->worker, 0);
}

int tdbc_primary(void)
{
    const char *args[] = {"primary", NULL};
    char out[32] = "";

    if (tstack_capture(args, out, sizeof out) != 0 || out[0] < '1' || out[0] > '9')
        return -1;
    return atoi(out);
}

int tdbc_await_primary(int old, int timeout_ms, long long *at_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    int k;

    do {
        k = tdbc_primary();
        if (k > 0 && k != old) {
            *at_ms = tproc_now_ms();
            return k;
        }
        tproc_sleep_ms(250);
    } while (tproc_now_ms() < deadline);
    *at_ms = tproc_now_ms();
    return -1;
}

bool tdbc_node(const char *verb, int k)
{
    return tcluster_server(verb, "db", k);
}

int tdbc_sync_standby(tdb *db)
{
    char *name = tdb_value(db,
                           "SELECT application_name FROM pg_stat_replication "
                           "WHERE sync_state = 'sync' LIMIT 1",
                           NULL);
    int k = name != NULL && strncmp(name, "db-", 3) == 0 ? atoi(name + 3) : -1;

    free(name);
    return k;
}

typedef struct client_arg {
    tclients *c;
    int id;
} client_arg;

static void note_slowest(tclients *c, long long ms)
{
    long long seen = atomic_load(&c->slowest_ms);

    while (ms > seen && !atomic_compare_exchange_weak(&c->slowest_ms, &seen, ms))
        ;
}

static void *client_main(void *arg)
{
    client_arg *ca = arg;
    tclients *c = ca->c;
    int id = ca->id;

    free(ca);
    for (int i = 1; !atomic_load(&c->stop); i++) {
        char pid[96], *body;
        long long first = tproc_now_ms();
        bool done = false;

        snprintf(pid, sizeof pid, "%s-%d-%d", c->prefix, id, i);
        body = tapi_payment(pid, pid);
        while (!done) {
            long long t0 = tproc_now_ms(), now;
            thttp_resp r;

            tapi_post(c->api, body, NULL, &r);
            now = tproc_now_ms();
            note_slowest(c, now - t0);
            if (r.status == 202) {
                atomic_fetch_add(&c->accepted, 1);
                atomic_fetch_add(&c->accepted_after_refusal, 1);
                if (thttp_header(&r, "Idempotent-Replayed") != NULL)
                    atomic_fetch_add(&c->replayed, 1);
                done = true;
            } else {
                if (r.status == 503) {
                    atomic_fetch_add(&c->unavailable, 1);
                    if (thttp_header(&r, "Retry-After") == NULL)
                        atomic_fetch_add(&c->no_retry_after, 1);
                } else {
                    if (atomic_fetch_add(&c->other, 1) < 5)
                        printf("client %d: %s answered %ld (%s)\n", id, pid, r.status,
                               r.status ? r.body : r.error);
                }
                atomic_store(&c->last_refusal, now);
                atomic_store(&c->accepted_after_refusal, 0);
            }
            thttp_resp_free(&r);
            if (!done && now - first > GIVE_UP_MS && atomic_load(&c->stop)) {
                atomic_fetch_add(&c->abandoned, 1);
                break;
            }
            if (!done)
                tproc_sleep_ms(RETRY_PAUSE_MS);
        }
        free(body);
        if (c->pause_ms > 0)
            tproc_sleep_ms(c->pause_ms);
    }
    return NULL;
}

bool tclients_start(tclients *c, const tapi *api, const char *prefix, int n, int pause_ms)
{
    memset(c, 0, sizeof *c);
    c->api = api;
    c->prefix = prefix;
    c->n = n < TCLIENTS_MAX ? n : TCLIENTS_MAX;
    c->pause_ms = pause_ms;
    for (int i = 0; i < c->n; i++) {
        client_arg *ca = malloc(sizeof *ca);

        if (!CHECK(ca != NULL))
            return false;
        ca->c = c;
        ca->id = i + 1;
        if (!CHECK(pthread_create(&c->threads[i], NULL, client_main, ca) == 0)) {
            free(ca);
            c->n = i;
            return false;
        }
    }
    return true;
}

void tclients_stop(tclients *c)
{
    atomic_store(&c->stop, true);
    for (int i = 0; i < c->n; i++)
        pthread_join(c->threads[i], NULL);
    printf("clients %s: %d accepted (%d as replays), %d answered 503 (%d without Retry-After), "
           "%d other, %d abandoned; slowest answer %lld ms\n",
           c->prefix, atomic_load(&c->accepted), atomic_load(&c->replayed),
           atomic_load(&c->unavailable), atomic_load(&c->no_retry_after), atomic_load(&c->other),
           atomic_load(&c->abandoned), atomic_load(&c->slowest_ms));
}

void tdbc_check_answers(tclients *c)
{
    CHECK_INT(atomic_load(&c->other), 0);
    CHECK_INT(atomic_load(&c->no_retry_after), 0);
    CHECK_INT(atomic_load(&c->abandoned), 0);
    CHECK(atomic_load(&c->slowest_ms) <= SLOWEST_MS);
}
