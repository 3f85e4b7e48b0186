/*
 * tests/dbcluster/test_dbc_failover.c - lose PostgreSQL nodes under a stream of payments
 *
 * Three PostgreSQL servers under Patroni, strict synchronous replication
 * (scripts/stack_db.sh). Clients post and retry each payment on 503 until it
 * is answered 202 (tests/dbcluster/tdbc.h). Every mode checks the answers
 * (only 202, or 503 with Retry-After; none slower than 10 s) and that every
 * payment answered 202 exists on the primary of the end and settles exactly
 * once, with relay and worker never restarted.
 *
 * "primary": SIGKILL the primary's node; /readyz 503 while there is no
 *   primary; a new primary within 30 s and accepts (and /readyz) again
 *   within 30 s of the kill; the old node started again
 *   rejoins as a standby; then a second failover the same way.
 * "tight": 8 clients as fast as they can, the primary killed at a random
 *   moment. This is the test strict synchronous replication exists for: with
 *   asynchronous replication a COMMIT returns once the primary's disk has it,
 *   the promoted standby may not, and the 202s of the last few milliseconds
 *   before the kill are gone (run it with DB_SYNCHRONOUS_MODE=false on the
 *   stack to see the count of missing payments; docs/operations.md has ours).
 * "standby": SIGKILL the synchronous standby: accepts go on once Patroni
 *   names the other standby; then the other one too: with no standby strict
 *   mode commits nothing, and a POST is answered 503 within 10 s; both
 *   started again, they rejoin and accepts resume.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cluster/tcluster.h"
#include "tests/dbcluster/tdbc.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

#define FAILOVER_MS 30000

static te2e e;

/* readyz - the status of the API's GET /readyz (0: no answer). */
static long readyz(const tapi *api)
{
    thttp_resp r;
    long status;

    thttp_get(api->url, "/readyz", NULL, &r);
    status = r.status;
    thttp_resp_free(&r);
    return status;
}

/*
 * fail_over - kill the primary's node, wait for another primary and for the
 * clients to be accepted again; start the old node again and see it rejoin
 * as a standby. The seconds it took go to the log.
 */
static void fail_over(const tapi *api, tclients *cl)
{
    int old = tdbc_primary(), now;
    long long t_kill, t_new, deadline;
    long ready = 0;

    printf("primary: db-%d\n", old);
    if (!CHECK(old >= 1))
        return;
    t_kill = tproc_now_ms();
    CHECK(tdbc_node("kill", old));
    /* no primary: the API is not ready (its pool finds no node that takes writes) */
    for (deadline = t_kill + 8000; ready != 503 && tproc_now_ms() < deadline;)
        if ((ready = readyz(api)) != 503)
            tproc_sleep_ms(200);
    printf("/readyz answered %ld %.1f s after the kill\n", ready,
           (tproc_now_ms() - t_kill) / 1000.0);
    CHECK_INT(ready, 503);
    now = tdbc_await_primary(old, FAILOVER_MS + 5000, &t_new);
    printf("new primary db-%d %.1f s after the kill\n", now, (t_new - t_kill) / 1000.0);
    CHECK(now >= 1);
    CHECK(t_new - t_kill <= FAILOVER_MS);
    /* accepted again: 202s (at least 20) after the last refusal, within 30 s of the kill */
    deadline = t_kill + FAILOVER_MS + 10000;
    while (atomic_load(&cl->accepted_after_refusal) < 20 && tproc_now_ms() < deadline)
        tproc_sleep_ms(100);
    CHECK(atomic_load(&cl->accepted_after_refusal) >= 20);
    if (atomic_load(&cl->last_refusal) > t_kill)
        printf("accepts refused (503) until %.1f s after the kill\n",
               (atomic_load(&cl->last_refusal) - t_kill) / 1000.0);
    CHECK(atomic_load(&cl->last_refusal) - t_kill <= FAILOVER_MS);
    CHECK_INT(readyz(api), 200);
    /* the old primary comes back as a standby of the new one (pg_rewind where needed) */
    CHECK(tdbc_node("start", old));
    CHECK_INT(tdbc_primary(), now);
}

static void check_settled(tdbc *c, tclients *cl)
{
    tcluster_check_once(e.db, cl->prefix, atomic_load(&cl->accepted), 60000);
    /* relay and worker carried on by themselves: the same processes, reconnected */
    CHECK(tproc_running(c->relay.proc));
    CHECK(tproc_running(c->worker.proc));
}

static void primary(tdbc *c)
{
    tclients cl;

    if (!tclients_start(&cl, &c->api, "dbc-primary", 4, 20))
        return;
    tproc_sleep_ms(3000);
    fail_over(&c->api, &cl);
    tproc_sleep_ms(2000);
    fail_over(&c->api, &cl); /* a second failover, onto a node that was a primary before */
    tproc_sleep_ms(2000);
    tclients_stop(&cl);
    tdbc_check_answers(&cl);
    check_settled(c, &cl);
}

static void tight(tdbc *c)
{
    tclients cl;
    unsigned r = (unsigned)tproc_now_ms();
    FILE *f = fopen("/dev/urandom", "rb");
    int wait_ms, old;
    long long t_new;

    if (f != NULL) {
        if (fread(&r, sizeof r, 1, f) != 1)
            r = (unsigned)tproc_now_ms();
        fclose(f);
    }
    wait_ms = 2000 + (int)(r % 3000);
    if (!tclients_start(&cl, &c->api, "dbc-tight", 8, 0))
        return;
    tproc_sleep_ms(wait_ms);
    old = tdbc_primary();
    printf("killing the primary db-%d %d ms into the stream, at %d accepted\n", old, wait_ms,
           atomic_load(&cl.accepted));
    CHECK(old >= 1 && tdbc_node("kill", old));
    CHECK(tdbc_await_primary(old, FAILOVER_MS + 5000, &t_new) >= 1);
    tproc_sleep_ms(5000);
    tclients_stop(&cl);
    tdbc_check_answers(&cl);
    CHECK(tdbc_node("start", old));
    check_settled(c, &cl);
}

static void standby(tdbc *c)
{
    tclients cl;
    int p = tdbc_primary(), sync, other = 0, before;
    long long t0;
    thttp_resp r;
    char *body;

    sync = tdbc_sync_standby(e.db);
    for (int k = 1; k <= 3; k++)
        if (k != p && k != sync)
            other = k;
    printf("primary db-%d, synchronous standby db-%d, other standby db-%d\n", p, sync, other);
    if (!CHECK(p >= 1 && sync >= 1 && other >= 1) ||
        !tclients_start(&cl, &c->api, "dbc-standby", 4, 20))
        return;
    tproc_sleep_ms(2000);
    CHECK(tdbc_node("kill", sync));
    tproc_sleep_ms(5000); /* Patroni names the other standby synchronous */
    before = atomic_load(&cl.accepted);
    tproc_sleep_ms(3000);
    printf("%d accepted in the 3 s from 5 s after the standby's loss\n",
           atomic_load(&cl.accepted) - before);
    CHECK(atomic_load(&cl.accepted) - before > 50);
    CHECK_INT(tdbc_primary(), p);

    /* both standbys down: strict mode commits nothing; an accept says so within 10 s */
    CHECK(tdbc_node("kill", other));
    tproc_sleep_ms(1000);
    body = tapi_payment("dbc-lone-1", "dbc-lone-1");
    t0 = tproc_now_ms();
    tapi_post(&c->api, body, NULL, &r);
    printf("with no standby: POST answered %ld in %lld ms\n", r.status, tproc_now_ms() - t0);
    CHECK_INT(r.status, 503);
    CHECK(thttp_header(&r, "Retry-After") != NULL);
    CHECK(tproc_now_ms() - t0 <= 10000);
    thttp_resp_free(&r);
    free(body);

    CHECK(tdbc_node("start", sync));
    CHECK(tdbc_node("start", other));
    before = atomic_load(&cl.accepted);
    tproc_sleep_ms(5000);
    CHECK(atomic_load(&cl.accepted) - before > 50);
    tclients_stop(&cl);
    tdbc_check_answers(&cl);
    check_settled(c, &cl);
}

static void run(void *arg)
{
    const char *mode = arg;
    tdbc c = {0};
    tguard g;
    char label[64];

    snprintf(label, sizeof label, "dbc_%s", mode);
    tcluster_guard(&g, "db"); /* every node back if this test dies */
    if (tdbc_start(&c, &e, label)) {
        if (strcmp(mode, "tight") == 0)
            tight(&c);
        else if (strcmp(mode, "standby") == 0)
            standby(&c);
        else
            primary(&c);
    }
    tdbc_stop(&c);
    tstack_run("start", "db");
    tstack_guard_done(g.pid, g.fd);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "primary";
    char name[64];

    snprintf(name, sizeof name, "dbc_failover_%s", mode);
    return te2e_main_arg(name, &e, run, (void *)mode);
}
