/*
 * tests/cluster/test_cluster_delivery_limit.c - the delivery limit of payments.settlement (quorum)
 *
 * "poison": with SETTLEMENT_DELIVERY_LIMIT=3, a worker that crashes on the message every time
 * (failpoint worker.before_commit=exit) is started again and again: after the limit the broker
 * dead-letters the message (x-death reason delivery_limit) and no ledger effect was written.
 * "db_outage": with a limit of 5, a worker slowed to about 50 payments/s (batches of 10, each
 * held 200 ms before its COMMIT) so that messages wait in the queue and in its hands, PostgreSQL
 * stops for 20 s under a stream of payments. The worker stops consuming while the database is
 * away, so the outage costs a message one delivery, not one per reconnect: every accepted
 * payment settles once and nothing is dead-lettered. A worker that took deliveries while the
 * database is away gives them back every 0.2-5 s and spends the limit within the outage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/cluster/tcluster.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

static te2e e;

static void poison(void)
{
    const char *limit[] = {"SETTLEMENT_DELIVERY_LIMIT=3", NULL};
    const char *crash[] = {"QUEUE_TYPE=quorum", "SETTLEMENT_DELIVERY_LIMIT=3",
                           "GATEWAY_FAILPOINTS=worker.before_commit=exit", NULL};
    tcluster c = {0};
    tmq_msg *msgs = NULL;
    size_t n = 0;
    long depth = 0;
    int runs = 0;
    tmq *m = NULL;
    thttp_resp r;
    char *body;

    if (!tcluster_start(&c, &e, "delivery_limit", limit))
        goto out;
    CHECK(tprog_stop(&c.worker, 0) == 0); /* the healthy worker must not take it */
    body = tapi_payment("dlim-1", "dlim-1");
    tapi_post(&c.api, body, NULL, &r);
    free(body);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM payments WHERE status = 'published'", 1, 10000, 50);
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL))
        goto out;
    while (depth < 1 && runs++ < 10) {
        tprog w = {0};

        tprog_start(&w, TPROG_WORKER, "delivery_limit-crashing", &e, crash); /* may die first */
        if (w.proc != NULL)
            tproc_wait_exit(w.proc, 10000);
        tprog_free(&w);
        depth = tmq_wait_depth(m, "payments.settlement.dlq", 1, 2000);
    }
    printf("in the DLQ after %d crashing workers\n", runs);
    CHECK_INT(depth, 1);
    CHECK(runs >= 3);
    msgs = tmq_read_all(m, "payments.settlement.dlq", false, &n);
    if (CHECK_INT((long long)n, 1)) {
        json_t *xd = tmq_x_death(&msgs[0]);
        json_t *first = json_array_get(xd, 0);

        char *text = json_dumps(xd, JSON_COMPACT);

        printf("x-death: %s\n", text ? text : "(none)");
        free(text);
        CHECK_STR(json_string_value(json_object_get(first, "reason")), "delivery_limit");
        json_decref(xd);
    }
    tmq_msgs_free(msgs, n);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 0);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), 0);
out:
    tmq_close(m);
    tcluster_stop(&c);
}

static void db_outage(void)
{
    const char *slow[] = {"SETTLEMENT_DELIVERY_LIMIT=5", "WORKER_PREFETCH=20",
                          "GATEWAY_FAILPOINTS=worker.before_commit=sleep=200", NULL};
    tcluster c = {0};
    tstream s = {0};
    tguard g;
    long depth = -1;

    tcluster_guard(&g, "db");
    if (!tcluster_start(&c, &e, "delivery_limit_db", slow) ||
        !tstream_start(&s, &c.api, "dbo", 100))
        goto out;
    tproc_sleep_ms(3000);
    {
        tmq *m = tmq_connect(e.amqp_url);

        if (m != NULL)
            depth = tmq_depth(m, "payments.settlement");
        tmq_close(m);
    }
    printf("payments.settlement holds %ld messages as the database stops\n", depth);
    CHECK(depth >= 50); /* a backlog, or the outage tests nothing */
    CHECK_INT(tstack_run("stop", "db"), 0);
    tproc_sleep_ms(20000);
    CHECK_INT(tstack_run("start", "db"), 0);
    tproc_sleep_ms(5000);
    tstream_stop(&s);
    CHECK(atomic_load(&s.accepted) > 400);
    /* the accepts during the outage were refused (503 or no answer), never 202 */
    tcluster_check_once(e.db, "dbo", atomic_load(&s.accepted), 60000);
    {
        tmq *m = tmq_connect(e.amqp_url);

        if (CHECK(m != NULL))
            CHECK_INT(tmq_depth(m, "payments.settlement.dlq"), 0);
        tmq_close(m);
    }
out:
    tcluster_finish(&c, &g);
}

static void run(void *arg)
{
    if (strcmp((const char *)arg, "poison") == 0)
        poison();
    else
        db_outage();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "poison";
    char name[64];

    snprintf(name, sizeof name, "cluster_delivery_limit_%s", mode);
    return te2e_main_arg(name, &e, run, (void *)mode);
}
