/*
 * tests/e2e/test_relay_purge.c - published outbox rows past OUTBOX_RETENTION_HOURS are deleted
 *
 * payments-relay purges once a minute, 1,000 rows a statement, and again at once
 * while a statement finds rows (worker/relay/chores.c). 2,500 rows published 25 h
 * ago are all gone within seconds of the start, in three statements (1,000, 1,000,
 * 500); 300 rows published an hour ago, inside the 24 h retention, and the payments
 * of all of them stay; paygw_relay_outbox_purged_total says 2,500.
 */
#include <stdio.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tcheck.h"
#include "tests/support/tproc.h"

#define OLD    2500
#define RECENT 300

static te2e e;

static void run(void)
{
    tprog relay = {0};

    if (!CHECK(te2e_seed(e.db, "purge", OLD + RECENT, true)))
        return;
    /* as the relay leaves them: published, the old ones a day and an hour ago */
    CHECK(tdb_exec(e.db,
                   "UPDATE outbox SET state = 'published', published_at = now() - "
                   "CASE WHEN id <= (SELECT min(id) + 2499 FROM outbox) THEN interval '25 hours' "
                   "ELSE interval '1 hour' END",
                   NULL));
    CHECK_INT(
        tdb_long(e.db,
                 "SELECT count(*) FROM outbox WHERE published_at < now() - interval '24 hours'",
                 NULL),
        OLD);
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_purge-relay", &e, NULL)))
        return;
    CHECK(te2e_wait_metric(&relay, 1, "paygw_relay_outbox_purged_total", OLD, 20000) == OLD);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM outbox", NULL), RECENT);
    CHECK_INT(
        tdb_long(e.db,
                 "SELECT count(*) FROM outbox WHERE published_at < now() - interval '24 hours'",
                 NULL),
        0);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM payments", NULL), OLD + RECENT);
    CHECK_INT(tproc_log_count(relay.proc, "event=outbox_purged rows=1000 "), 2);
    CHECK_INT(tproc_log_count(relay.proc, "event=outbox_purged rows=500 "), 1);
    tproc_sleep_ms(2500); /* the next round finds nothing: it logs nothing and deletes nothing */
    CHECK(tprog_metric(&relay, "paygw_relay_outbox_purged_total") == OLD);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM outbox", NULL), RECENT);
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("relay_purge", &e, run);
}
