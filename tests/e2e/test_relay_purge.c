/*
 * tests/e2e/test_relay_purge.c - published outbox rows past OUTBOX_RETENTION_HOURS are deleted
 *
 * payments-relay purges once a minute, 1,000 rows a statement, and again at once
 * while a statement finds rows (worker/relay/chores.c). 2,500 rows published 25 h
 * ago are all gone within seconds of the start, in three statements (1,000, 1,000,
 * 500); 300 rows published an hour ago, inside the 24 h retention, and the payments
 * of all of them stay; paygw_relay_outbox_purged_total says 2,500.
 *
 * Then the same while rows flow: 2,500 more rows a day old and 20,000 pending
 * rows for a new relay. Every old row goes, every pending row is published, and
 * each piece purged while rows flow (busy=1) is at most 200 rows: a piece of
 * 1,000 cold rows holds the relay's loop, and the lanes, for 60-100 ms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tcheck.h"
#include "tests/support/tproc.h"

#define OLD    2500
#define RECENT 300
#define FLOWING 20000

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

/* The largest piece logged while rows flowed, or -1 if none was. */
static long largest_busy_piece(const tproc *p)
{
    const char *key = "event=outbox_purged rows=";
    char *log = tproc_log(p);
    long largest = -1;

    if (log == NULL)
        return -1;
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *rows = strstr(line, key);

        if (rows != NULL && strstr(line, " busy=1") != NULL) {
            long r = strtol(rows + strlen(key), NULL, 10);

            largest = r > largest ? r : largest;
        }
    }
    free(log);
    return largest;
}

static void run_flowing(void)
{
    tprog relay = {0};
    long largest;

    tcheck_context("flowing");
    /* the purge reads the outbox in id order and stops at the first row it keeps: the first
     * run's recent rows would stand before this run's old ones */
    CHECK(tdb_exec(e.db, "DELETE FROM outbox", NULL));
    CHECK(te2e_seed(e.db, "old", OLD, true));
    CHECK(tdb_exec(e.db,
                   "UPDATE outbox SET state = 'published', published_at = now() - "
                   "interval '25 hours' WHERE event_id LIKE 'old-%'",
                   NULL));
    CHECK(te2e_seed(e.db, "flow", FLOWING, true));
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "relay_purge-flowing", &e, NULL)))
        return;
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM outbox WHERE event_id LIKE 'old-%'", 0, 30000, 50);
    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM outbox WHERE event_id LIKE 'flow-%' "
                    "AND state = 'published'",
                    FLOWING, 60000, 50);
    largest = largest_busy_piece(relay.proc);
    printf("flowing: %d pending rows published, %d old rows purged, the largest piece %ld\n",
           FLOWING, OLD, largest);
    CHECK(largest > 0); /* the purge overlapped the publishing: the case under test */
    CHECK(largest <= 200);
    tprog_stop(&relay, 10000);
}

static void run_both(void)
{
    run();
    run_flowing();
}

int main(void)
{
    return te2e_main("relay_purge", &e, run_both);
}
