/* tests/e2e/te2e.h - the fixture of e2e, admin and fault tests: own database, vhost, programs */
#ifndef TESTS_E2E_TE2E_H
#define TESTS_E2E_TE2E_H

#include <stdbool.h>
#include <sys/types.h>

#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/tproc.h"

/* One test's world: a migrated database and a vhost of its own, both deleted at the end. */
typedef struct te2e {
    const char *name; /* the test's name, for labels */
    tdb *db;          /* owned */
    char vhost[96];
    char *amqp_url; /* owned: the vhost's URL */
} te2e;

/*
 * te2e_init - check the environment (GW_TEST_PG_URL, GW_STACK and the
 * binaries), create the database and the vhost "e2e-@name-PID" (a few tries
 * each: a test that restarts the shared servers may be doing it right now).
 * Returns 0 when ready, 77 when the environment is missing (meson: SKIP; a
 * line says why), 1 on failure (printed). te2e_cleanup() is safe after any
 * result.
 */
int te2e_init(te2e *e, const char *name);
void te2e_cleanup(te2e *e);

/*
 * te2e_main - the whole main() of a test with one run(): te2e_init(@e,
 * @name), @run when ready, te2e_cleanup(); 77 when skipped, else the summary
 * of "test_@name" (a fixture that could not be set up is a failure).
 */
int te2e_main(const char *name, te2e *e, void (*run)(void));
/* te2e_main_arg - te2e_main() with @run(@arg). */
int te2e_main_arg(const char *name, te2e *e, void (*run)(void *arg), void *arg);

/* The programs under test. */
typedef enum tprog_kind { TPROG_RELAY, TPROG_WORKER } tprog_kind;

typedef struct tprog {
    tproc *proc; /* owned; NULL when stopped */
    int port;    /* of the health/metrics server */
    char url[64];
    int failures_at_start;
} tprog;

/*
 * tprog_start - start the relay or the worker on @e's database and vhost with
 * every config variable cleared, METRICS_LISTEN=127.0.0.1:0, then @extra
 * ("KEY=VALUE", NULL-terminated, may be NULL). Waits (20 s) until /readyz
 * answers 200. False (after printing the log tail) on failure.
 */
bool tprog_start(tprog *p, tprog_kind kind, const char *label, const te2e *e,
                 const char *const *extra);

/*
 * te2e_wait_ready - poll @base/readyz (any of the three programs) until it
 * answers 200 while @p runs, 20 s at most. False (after printing the log
 * tail) when @p exited or the deadline passed.
 */
bool te2e_wait_ready(tproc *p, const char *base, const char *label);

/*
 * tprog_stop - SIGTERM and wait (12 s): checks the status is 0 and, with
 * @within_ms > 0, that it came within @within_ms. Prints the log tail when a
 * check failed since the start. Returns the status (-1: killed at the
 * deadline). Frees the process; accepts a stopped @p.
 */
int tprog_stop(tprog *p, int within_ms);

/* tprog_free - SIGKILL if running, free. Accepts a stopped @p. */
void tprog_free(tprog *p);

/*
 * tprog_metric - the value of series @name (labels included, exactly) on
 * /metrics; -1 when absent or unreachable.
 */
double tprog_metric(const tprog *p, const char *name);

/* tprog_sum - the sum of tprog_metric() over @n programs (absent counts 0). */
double tprog_sum(tprog *ps, int n, const char *name);

/*
 * te2e_wait_long - poll @sql (no parameters) every @every_ms until it returns
 * @want or @timeout_ms passes; returns the last value (-1 on error). Prints
 * nothing: the caller checks.
 */
long long te2e_wait_long(tdb *db, const char *sql, long long want, int timeout_ms, int every_ms);
/* CHECK_LEDGER_BALANCED - the debits of ledger_entries in @db sum to its credits (a check). */
#define CHECK_LEDGER_BALANCED(db) te2e_check_balanced_at(__FILE__, __LINE__, (db))
bool te2e_check_balanced_at(const char *file, int line, tdb *db);
/* CHECK_WAIT_LONG - te2e_wait_long() reaches @want: a check of tcheck.h naming the query. */
#define CHECK_WAIT_LONG(db, sql, want, timeout_ms, every_ms)                                       \
    te2e_check_wait_at(__FILE__, __LINE__, (db), (sql), (want), (timeout_ms), (every_ms))
bool te2e_check_wait_at(const char *file, int line, tdb *db, const char *sql, long long want,
                        int timeout_ms, int every_ms);

/* te2e_wait_metric - poll tprog_sum() until it reaches at least @want; the last value. */
double te2e_wait_metric(tprog *ps, int n, const char *name, double want, int timeout_ms);

/*
 * Test data. Event i (1-based) of @prefix is "<prefix>-e<i>", its payment
 * "<prefix>-p<i>", pix approved, amount 100 + i, payee 001/1234-5.
 */
void te2e_event_id(char *buf, size_t len, const char *prefix, int i);
void te2e_payment_id(char *buf, size_t len, const char *prefix, int i);

/*
 * te2e_seed - insert payments 1..@n of @prefix. With @outbox they are
 * `accepted` with a pending outbox row (as accept_payment() writes them);
 * without, they are `published` (as the relay leaves them) and no outbox row.
 */
bool te2e_seed(tdb *db, const char *prefix, int n, bool outbox);

/* te2e_body - the accepted JSON of event @i of @prefix (new string, free()). */
char *te2e_body(const char *prefix, int i);

/*
 * te2e_insert_payment - one `published` payment row; te2e_payment_json - its
 * body (new string). @account like "1234-5", @bank 3 digits.
 */
bool te2e_insert_payment(tdb *db, const char *event_id, const char *payment_id, long long amount,
                         const char *bank, const char *account);
char *te2e_payment_json(const char *event_id, const char *payment_id, long long amount,
                        const char *bank, const char *account);

/*
 * te2e_publish_event - publish @body as the relay would (payments.events,
 * routing key payment.pix.approved, message_id @event_id, x-attempt 1), confirmed.
 */
bool te2e_publish_event(tmq *m, const char *event_id, const char *body);

/* te2e_publish_attempt - te2e_publish_event() with x-attempt @attempt (a retry's copy). */
bool te2e_publish_attempt(tmq *m, const char *event_id, const char *body, int attempt);

/*
 * te2e_publish_events - events 1..@n of @prefix (te2e_body()) published as
 * te2e_publish_event() does, but many at a time: confirms are awaited every
 * 500 publishes and at the end. With @dup_every > 0, every @dup_every-th event
 * goes out a second time right behind itself. True when all were confirmed.
 */
bool te2e_publish_events(tmq *m, const char *prefix, int n, int dup_every);

/*
 * te2e_event_counts - how many of @msgs carry message_id "<prefix>-e<i>", for
 * i in 1..@n: a new array (free()) of @n + 1 counts, [0] counting the
 * messages that are none of them.
 */
int *te2e_event_counts(const tmq_msg *msgs, size_t nmsgs, const char *prefix, int n);

/*
 * te2e_event_set - the event numbers @sql (no parameters) returns as one text
 * "3,1,7" (string_agg of the numbers in the ids), as a new array (free()) of
 * @n + 1 flags: [i] is 1 when event i is in it. *@count: how many are.
 */
unsigned char *te2e_event_set(tdb *db, const char *sql, int n, long long *count);

/* te2e_elapsed_s - seconds since @t0_ms (tproc_now_ms()). */
double te2e_elapsed_s(long long t0_ms);

#endif
