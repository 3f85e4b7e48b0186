/*
 * tests/cluster/test_cluster_majority.c - two nodes of three down: nothing confirmed, nothing lost
 *
 * The API (OUTBOX_MAX_BACKLOG=300), relay and worker on quorum queues. Two
 * nodes are stopped: the queues have no majority, so no publish is
 * confirmed. Payments posted then stay accepted with their outbox rows
 * pending, the backlog grows to the limit and the API answers 503 with
 * Retry-After. Once the nodes are back, every accepted payment settles
 * exactly once.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/cluster/tcluster.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

#define LIMIT 300

static te2e e;

static void run(void)
{
    const char *extra[] = {"OUTBOX_MAX_BACKLOG=300", NULL};
    tcluster c = {0};
    tstream s = {0};
    int up, down[2], n = 0;
    long long published, pending;
    tguard g;

    tcluster_guard(&g, "broker");
    if (!tcluster_start(&c, &e, "cluster_majority", extra))
        goto out;
    /* keep the node the programs are on: the majority goes, the connections stay */
    up = (int)tprog_metric(&c.relay, "paygw_amqp_connected_node");
    if (!CHECK(up >= 1 && up <= 3))
        goto out;
    for (int k = 1; k <= 3; k++)
        if (k != up)
            down[n++] = k;
    CHECK(tcluster_node("stop", down[0]));
    CHECK(tcluster_node("stop", down[1]));

    if (!tstream_start(&s, &c.api, "mj", 200))
        goto out;
    /* 3 s at 200/s is twice the limit: the backlog reaches it and the API says 503 */
    tproc_sleep_ms(3000);
    tstream_stop(&s);
    published = tdb_long(e.db, "SELECT count(*) FROM outbox WHERE state = 'published'", NULL);
    pending = tdb_long(e.db, "SELECT count(*) FROM outbox WHERE state = 'pending'", NULL);
    printf("without a majority: %lld outbox rows published, %lld pending\n", published, pending);
    CHECK_INT(published, 0);
    CHECK_INT(pending, atomic_load(&s.accepted));
    CHECK(atomic_load(&s.accepted) >= LIMIT);
    CHECK(atomic_load(&s.unavailable) > 0);
    CHECK_INT(atomic_load(&s.other), 0);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM payments WHERE status = 'settled'", NULL), 0);
    {
        thttp_resp r;
        char *body = tapi_payment("mj-probe", "mj-probe");

        tapi_post(&c.api, body, NULL, &r);
        free(body);
        CHECK_INT(r.status, 503);
        CHECK(tapi_check_retry_after_at(__FILE__, __LINE__, &r));
        thttp_resp_free(&r);
    }

    CHECK(tcluster_node("start", down[0]));
    CHECK(tcluster_node("start", down[1]));
    tcluster_check_once(e.db, "mj", atomic_load(&s.accepted), 60000);
out:
    tcluster_finish(&c, &g);
}

int main(void)
{
    return te2e_main("cluster_majority", &e, run);
}
