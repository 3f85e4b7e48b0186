/* tests/support/tapi.h - payments-api under test: start, address, stop */
#ifndef TESTS_SUPPORT_TAPI_H
#define TESTS_SUPPORT_TAPI_H

#include <stdbool.h>

#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"

#define TAPI_TOKEN            "test-api-token-6f1d2c9a8b7e"
#define TAPI_ADMIN_TOKEN      "test-admin-token-3e5b7a9c1d2f"
#define TAPI_DEFAULT_AMQP_URL "amqp://guest:guest@127.0.0.1:25672/%2f"

/* Every variable the programs read (docs/operations.md, "Configuration" and a few more): removed by
 * default. */
extern const char *const tapi_config_vars[];

typedef struct tapi {
    tproc *proc; /* owned */
    int port;
    char url[64];          /* http://127.0.0.1:PORT */
    int failures_at_start; /* tcheck_failures() then: a failure since prints the log tail */
} tapi;

/* tapi_bin - $GW_API_BIN, or NULL after printing why. */
const char *tapi_bin(void);

/*
 * tapi_test_init - the start of every test of payments-api on a database of
 * its own: 77 (SKIP, the line printed) without GW_TEST_PG_URL; otherwise
 * $GW_API_BIN is CHECKed, curl set up and a migrated database made in *@db
 * (CHECKed). 0 when ready, 1 when a check failed.
 * tapi_test_cleanup - drop @db (may be NULL) and curl's global state.
 */
int tapi_test_init(tdb **db);
void tapi_test_cleanup(tdb *db);

/*
 * tapi_main - the whole main() of a test of payments-api: tapi_test_init(@db),
 * @run when ready, tapi_test_cleanup(); 77 when skipped, else the summary of
 * @name (a database that could not be made is a failure). With an @api, @run
 * runs inside tapi_with(@api, @label).
 */
int tapi_main(const char *name, tdb **db, tapi *api, const char *label, void (*run)(void));

/* tapi_amqp_url - $GW_TEST_AMQP_URL or TAPI_DEFAULT_AMQP_URL; the API only checks its syntax. */
const char *tapi_amqp_url(void);

/*
 * tapi_env - a NULL-terminated environment change list for tproc (new,
 * free() the array only; its strings are static or borrowed from @db_url and
 * @extra): every config variable removed, then DATABASE_URL=@db_url (when not
 * NULL), AMQP_URL, both tokens, API_LISTEN=127.0.0.1:0, then @extra in order.
 */
const char **tapi_env(const char *db_url, const char *const *extra);

/*
 * tapi_start - start payments-api on @db_url with @extra environment and wait
 * (15 s) for its listening port. False (after printing the log tail) on failure.
 */
bool tapi_start(tapi *a, const char *label, const char *db_url, const char *const *extra);

/*
 * tapi_with - tapi_start(@a, @label) on @db with no extra environment
 * (CHECKed), @run when it started, then tapi_stop(@a).
 */
void tapi_with(tapi *a, const char *label, const tdb *db, void (*run)(void));

/*
 * tapi_stop - SIGTERM and wait (12 s); checks the exit status is 0 (a graceful
 * stop) and frees the process. Returns the exit status. Accepts a stopped @a.
 */
int tapi_stop(tapi *a);

/*
 * tapi_payment - a valid payment decision (pix, approved, 15000 BRL) as a new
 * JSON string (free()).
 */
char *tapi_payment(const char *event_id, const char *payment_id);

/* Requests with the API token. */
bool tapi_post(const tapi *a, const char *body, const char *const *extra, thttp_resp *out);
bool tapi_post_n(const tapi *a, const char *body, size_t len, const char *const *extra,
                 thttp_resp *out);
bool tapi_get(const tapi *a, const char *path, thttp_resp *out);

/*
 * tapi_check_problem - @r is an application/problem+json answer with @status,
 * a type ending in /problems/@slug and the members title, status and detail.
 */
bool tapi_check_problem_at(const char *file, int line, const thttp_resp *r, long status,
                           const char *slug);
#define CHECK_PROBLEM(r, status, slug)                                                             \
    tapi_check_problem_at(__FILE__, __LINE__, (r), (status), (slug))

/*
 * CHECK_ACCEPTED - @r is the 202 of a payment accepted for @event_id and
 * @payment_id: JSON, Location, the three members, and Idempotent-Replayed
 * "true" when @replay, absent when not (eight checks).
 */
#define CHECK_ACCEPTED(r, event_id, payment_id, replay)                                            \
    tapi_check_accepted_at(__FILE__, __LINE__, (r), (event_id), (payment_id), (replay))
void tapi_check_accepted_at(const char *file, int line, const thttp_resp *r, const char *event_id,
                            const char *payment_id, bool replay);

/* CHECK_ROWS - @db has @n rows of @event_id in payments and outbox, and none in idempotency_keys
 * (the payment row is the record since sql/0018; three checks). */
#define CHECK_ROWS(db, event_id, n) tapi_check_rows_at(__FILE__, __LINE__, (db), (event_id), (n))
void tapi_check_rows_at(const char *file, int line, tdb *db, const char *event_id, long long n);

/* CHECK_RETRY_AFTER - @r has a Retry-After header of a positive number of seconds. */
bool tapi_check_retry_after_at(const char *file, int line, const thttp_resp *r);
#define CHECK_RETRY_AFTER(r) tapi_check_retry_after_at(__FILE__, __LINE__, (r))

/* tapi_metric - the value of the series @name (with labels, exactly) in @text; -1 when absent. */
double tapi_metric(const char *text, const char *name);

#endif
