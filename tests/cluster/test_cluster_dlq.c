/*
 * tests/cluster/test_cluster_dlq.c - the DLQ's leader killed while letters arrive and are drained
 *
 * 300 payments of R$ 0 (a permanent failure: straight to the DLQ) on quorum queues. While the
 * worker dead-letters them, the node holding the leader of payments.settlement.dlq is killed and
 * started again; then the admin drain stores them 25 at a time, and the DLQ's leader is killed
 * again half-way. Every payment is dead_lettered, and every letter is stored exactly once: the
 * at-least-once dead-lettering and a drain whose ack was lost may both hand a letter over twice,
 * and the drain's dedupe keeps one. Then the leader of payments.settlement is killed and five
 * letters are replayed: each replay is confirmed (from whichever node the API is on now).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/admin/tadmin.h"
#include "tests/cluster/tcluster.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

#define LETTERS 300

static te2e e;

static void kill_dlq_leader(void)
{
    int k = tcluster_leader(&e, "payments.settlement.dlq");

    printf("leader of payments.settlement.dlq on broker-%d\n", k);
    if (CHECK(k >= 1)) {
        CHECK(tcluster_node("kill", k));
        CHECK(tcluster_node("start", k));
    }
}

/* Kill the node of payments.settlement's leader, start it, replay five letters (retrying 503s). */
static void replay_after_kill(const tcluster *c)
{
    int k = tcluster_leader(&e, "payments.settlement"), replayed = 0;
    char *ids = tdb_value(e.db,
                          "SELECT string_agg(id::text, ' ' ORDER BY id) FROM "
                          "(SELECT id FROM dead_letters ORDER BY id LIMIT 5) s",
                          NULL);
    char *save = NULL;

    printf("leader of payments.settlement on broker-%d\n", k);
    if (CHECK(k >= 1)) {
        CHECK(tcluster_node("kill", k));
        CHECK(tcluster_node("start", k));
    }
    for (char *id = ids ? strtok_r(ids, " ", &save) : NULL; id != NULL;
         id = strtok_r(NULL, " ", &save)) {
        char path[64];

        snprintf(path, sizeof path, "/admin/dlq/%s/replay", id);
        for (int tries = 0; tries < 20; tries++) {
            thttp_resp r;
            long status;

            tadm_admin(&c->api, "POST", path, &r);
            status = r.status;
            thttp_resp_free(&r);
            if (status == 202) {
                replayed++;
                break;
            }
            printf("replay %s answered %ld: again in 0.5 s\n", id, status);
            tproc_sleep_ms(500);
        }
    }
    free(ids);
    CHECK_INT(replayed, 5);
    CHECK_INT(
        tdb_long(e.db, "SELECT count(*) FROM dead_letters WHERE replayed_at IS NOT NULL", NULL), 5);
}

static void run(void)
{
    tcluster c = {0};
    int calls = 0;
    bool killed_in_drain = false;
    long long stored = 0;
    tguard g;
    char id[32];

    tcluster_guard(&g, "broker");
    if (!tcluster_start(&c, &e, "cluster_dlq", NULL))
        goto out;
    for (int i = 1; i <= LETTERS; i++) {
        snprintf(id, sizeof id, "dl-%d", i);
        tadm_accept(&c.api, id, id, "pix", "approved", 0, "001", "1234-5", NULL);
        if (i == LETTERS / 3)
            kill_dlq_leader(); /* while the worker dead-letters */
    }
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM payments WHERE status = 'dead_lettered'", LETTERS,
                    60000, 200);

    while (stored < LETTERS && calls++ < 200) {
        thttp_resp r;

        if (!killed_in_drain && stored >= LETTERS / 2) {
            kill_dlq_leader(); /* half-way through the drain */
            killed_in_drain = true;
        }
        /* a 503 (the admin's connection was on the killed node) is retried, as a client would */
        tadm_admin(&c.api, "POST", "/admin/dlq/drain?max=25", &r);
        if (r.status != 200) {
            printf("drain answered %ld: again in 0.5 s\n", r.status);
            tproc_sleep_ms(500);
        }
        thttp_resp_free(&r);
        stored = tdb_long(e.db, "SELECT count(*) FROM dead_letters", NULL);
    }
    printf("%lld letters stored after %d drain calls\n", stored, calls);
    CHECK(killed_in_drain);
    CHECK_INT(stored, LETTERS);
    CHECK_INT(tdb_long(e.db, "SELECT count(DISTINCT event_id) FROM dead_letters", NULL), LETTERS);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 0);
    /* anything still in the DLQ is a second copy of a stored letter: draining it adds nothing */
    {
        thttp_resp r;

        CHECK(tadm_drain(&c.api, 0, &r));
        thttp_resp_free(&r);
    }
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM dead_letters", NULL), LETTERS);
    replay_after_kill(&c);
out:
    tcluster_finish(&c, &g);
}

int main(void)
{
    return te2e_main("cluster_dlq", &e, run);
}
