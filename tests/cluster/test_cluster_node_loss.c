/*
 * tests/cluster/test_cluster_node_loss.c - lose a node of three under a stream of payments
 *
 * The API, relay and worker on quorum queues, payments posted at 150/s. Mode
 * "kill": SIGKILL the node holding the leader of payments.settlement, start it
 * again, then SIGKILL another node and start it again. Mode "rolling": stop
 * and start each node in turn. Either way: no accept fails, settlement
 * resumes (every payment settles within 30 s of the end of the stream),
 * each payment has exactly one debit and one credit, nothing is
 * dead-lettered, and the programs moved to another node when theirs went.
 */
#include <stdio.h>
#include <string.h>

#include "tests/cluster/tcluster.h"
#include "tests/support/tcheck.h"
#include "tests/support/tstack.h"

#define NODES 3

static te2e e;

/* The first node that is not @a (nor @b). */
static int other_node(int a, int b)
{
    for (int k = 1; k <= NODES; k++)
        if (k != a && k != b)
            return k;
    return 1;
}

static void lose_two(void)
{
    int first = tcluster_leader(&e, "payments.settlement"), second;

    printf("leader of payments.settlement on broker-%d\n", first);
    if (!CHECK(first >= 1 && first <= NODES))
        return;
    CHECK(tcluster_node("kill", first));
    tproc_sleep_ms(3000);
    CHECK(tcluster_node("start", first));
    second = tcluster_leader(&e, "payments.settlement");
    printf("leader of payments.settlement now on broker-%d\n", second);
    if (second == first || second < 1)
        second = other_node(first, 0);
    tproc_sleep_ms(2000);
    CHECK(tcluster_node("kill", second));
    tproc_sleep_ms(3000);
    CHECK(tcluster_node("start", second));
}

static void rolling(void)
{
    for (int k = 1; k <= NODES; k++) {
        CHECK(tcluster_node("stop", k));
        tproc_sleep_ms(1000);
        CHECK(tcluster_node("start", k));
        tproc_sleep_ms(1000);
    }
}

static void run(void *arg)
{
    const char *mode = arg;
    tcluster c = {0};
    tstream s = {0};
    tguard g;
    char prefix[32];

    snprintf(prefix, sizeof prefix, "nl-%s", mode);
    tcluster_guard(&g, "broker"); /* every node back if this test dies */
    if (!tcluster_start(&c, &e, "cluster_node_loss", NULL) ||
        !tstream_start(&s, &c.api, prefix, 150))
        goto out;
    tproc_sleep_ms(3000);
    if (strcmp(mode, "rolling") == 0)
        rolling();
    else
        lose_two();
    tproc_sleep_ms(2000);
    tstream_stop(&s);
    CHECK(atomic_load(&s.accepted) > 1000);
    CHECK_INT(atomic_load(&s.accepted), atomic_load(&s.sent));
    tcluster_check_once(e.db, prefix, atomic_load(&s.accepted), 30000);
    /* the programs moved on: at least one reconnect between them */
    CHECK(tprog_metric(&c.relay, "paygw_amqp_connects_total") +
              tprog_metric(&c.worker, "paygw_amqp_connects_total") >
          3);
    CHECK(tprog_metric(&c.relay, "paygw_amqp_connected_node") >= 1);
out:
    tcluster_finish(&c, &g);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "kill";
    char name[64];

    snprintf(name, sizeof name, "cluster_node_loss_%s", mode);
    return te2e_main_arg(name, &e, run, (void *)mode);
}
