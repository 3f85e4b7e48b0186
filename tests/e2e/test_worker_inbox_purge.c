/*
 * tests/e2e/test_worker_inbox_purge.c - inbox rows past INBOX_RETENTION_DAYS are
 * deleted, in small pieces while payments are being settled
 *
 * 6,000 inbox rows processed 31 days ago (a backlog: the worker was stopped, or a
 * month ago was a busy day) and 100 processed 29 days ago; 6,000 payments waiting
 * in the settlement queue when the worker starts. Every old row goes, the recent
 * ones stay, every payment settles. Each piece purged while deliveries flow
 * (busy=1) is at most 200 rows: pieces of 1,000 cold rows took 60-100 ms each,
 * back to back between the batches, and held every settlement behind them
 * (worker/settle/settle.c, shared/lib/pace.h). Idle pieces take 1,000.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tcheck.h"
#include "tests/support/tproc.h"

#define OLD      6000
#define RECENT   100
#define PAYMENTS 6000

static te2e e;

/* The pieces logged with @busy: how many, and the largest. */
static int pieces(const tproc *p, int busy, long *largest)
{
    char *log = tproc_log(p), needle[32];
    int n = 0;

    *largest = 0;
    if (log == NULL)
        return -1;
    snprintf(needle, sizeof needle, " busy=%d", busy);
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *rows = strstr(line, "event=inbox_purged rows=");

        if (rows == NULL || strstr(line, needle) == NULL)
            continue;
        n++;
        long r = strtol(rows + strlen("event=inbox_purged rows="), NULL, 10);
        if (r > *largest)
            *largest = r;
    }
    free(log);
    return n;
}

static void run(void)
{
    tprog relay = {0}, worker = {0};
    long largest = 0;
    int busy_n, idle_n;

    CHECK(tdb_exec(e.db,
                   "INSERT INTO inbox (event_id, payment_id, attempt, processed_at) "
                   "SELECT 'old-' || i, 'old-' || i, 1, now() - interval '31 days' "
                   "FROM generate_series(1, 6000) i",
                   NULL));
    CHECK(tdb_exec(e.db,
                   "INSERT INTO inbox (event_id, payment_id, attempt, processed_at) "
                   "SELECT 'keep-' || i, 'keep-' || i, 1, now() - interval '29 days' "
                   "FROM generate_series(1, 100) i",
                   NULL));
    if (!CHECK(te2e_seed(e.db, "ip", PAYMENTS, true)) ||
        !CHECK(tprog_start(&relay, TPROG_RELAY, "worker_inbox_purge-relay", &e, NULL)))
        goto stop;
    /* every payment in the queue before the worker starts: it is busy from its first batch */
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM outbox WHERE state = 'published'", PAYMENTS, 60000,
                    50);
    if (!CHECK(tprog_start(&worker, TPROG_WORKER, "worker_inbox_purge-worker", &e, NULL)))
        goto stop;
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM payments WHERE status = 'settled'", PAYMENTS, 60000,
                    50);
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM inbox WHERE event_id LIKE 'old-%'", 0, 60000, 50);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox WHERE event_id LIKE 'keep-%'", NULL),
              RECENT);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox WHERE event_id LIKE 'ip-%'", NULL),
              PAYMENTS);
    CHECK_LEDGER_BALANCED(e.db);

    busy_n = pieces(worker.proc, 1, &largest);
    printf("%d pieces while settling, the largest %ld rows\n", busy_n, largest);
    CHECK(busy_n >= 1); /* the purge overlapped the settlements: the case under test */
    CHECK(largest <= 200);
    idle_n = pieces(worker.proc, 0, &largest);
    printf("%d pieces while idle, the largest %ld rows\n", idle_n, largest);
    CHECK(largest <= 1000);
stop:
    tprog_stop(&worker, 10000);
    tprog_stop(&relay, 10000);
}

int main(void)
{
    return te2e_main("worker_inbox_purge", &e, run);
}
