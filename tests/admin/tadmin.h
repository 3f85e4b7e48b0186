/* tests/admin/tadmin.h - the fixture of an admin test: own database, own vhost, the three programs
 */
#ifndef TESTS_ADMIN_TADMIN_H
#define TESTS_ADMIN_TADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"

#define TADM_DLQ        "payments.settlement.dlq"
#define TADM_SETTLEMENT "payments.settlement"
#define TADM_EVENTS     "payments.events"
#define TADM_DELAYS     "RETRY_DELAYS_MS=200,400" /* attempts 1..3 within a second */

/* One test's world: a migrated database and a RabbitMQ vhost of its own, both removed at the end.
 */
typedef struct tadm {
    const char *name;
    tdb *db; /* owned */
    char vhost[96];
    char *amqp_url;     /* owned: the vhost's URL */
    char amqp_env[640]; /* "AMQP_URL=<amqp_url>" for the programs */
} tadm;

/*
 * tadm_init - check the environment (GW_TEST_PG_URL, GW_STACK, the three
 * binaries), create the database and the vhost ("$GW_STACK vhost NAME").
 * 0 when ready, 77 when the environment is missing (a SKIP line says why),
 * 1 on failure (printed). tadm_cleanup() is safe after any result.
 */
int tadm_init(tadm *t, const char *name);
void tadm_cleanup(tadm *t);

/* payments-relay or payments-worker under test. */
typedef struct tadm_prog {
    tproc *proc; /* owned; NULL when stopped */
    int port;    /* of METRICS_LISTEN */
    char url[64];
    int failures_at_start;
} tadm_prog;

typedef enum tadm_kind { TADM_RELAY, TADM_WORKER } tadm_kind;

/*
 * tadm_prog_start - start the relay or the worker on @t's database and vhost,
 * every config variable cleared, METRICS_LISTEN=127.0.0.1:0, TADM_DELAYS, then
 * @extra; wait (20 s) until /readyz is 200. False after printing the log tail.
 */
bool tadm_prog_start(tadm_prog *p, tadm_kind kind, const char *label, const tadm *t,
                     const char *const *extra);

/* tadm_prog_stop - SIGTERM, wait (12 s), CHECK exit status 0, free. Accepts a stopped @p. */
int tadm_prog_stop(tadm_prog *p);

/*
 * tadm_api_start - payments-api on @t's database with AMQP_URL of @t's vhost,
 * TADM_DELAYS, then @extra; waits for its port and for /readyz 200.
 */
bool tadm_api_start(tapi *a, const tadm *t, const char *label, const char *const *extra);

/* tadm_all_start - relay, worker (with @worker_extra) and api; false when one did not start. */
bool tadm_all_start(const tadm *t, tadm_prog *relay, tadm_prog *worker, tapi *api,
                    const char *const *worker_extra);

/* tadm_all_stop - SIGTERM each of them (those that run) and check exit status 0. */
void tadm_all_stop(tadm_prog *relay, tadm_prog *worker, tapi *api);

/* ---- HTTP ------------------------------------------------------------------------------ */

/*
 * tadm_call - @method @path on @a with "Authorization: Bearer @token" (NULL:
 * no Authorization). POST sends an empty body. Fills @out (thttp_resp_free()).
 */
bool tadm_call(const tapi *a, const char *method, const char *path, const char *token,
               thttp_resp *out);

/* tadm_admin - tadm_call() with the admin token. */
bool tadm_admin(const tapi *a, const char *method, const char *path, thttp_resp *out);

/*
 * tadm_payment_json - a payment decision as a new JSON string (free()):
 * @method pix/ted/card, @decision approved/refused, payee @bank/@account.
 */
char *tadm_payment_json(const char *event_id, const char *payment_id, const char *method,
                        const char *decision, long long amount, const char *bank,
                        const char *account);

/* tadm_accept - POST the payment to /v1/payments and CHECK 202; the body in *@json if not NULL. */
bool tadm_accept(const tapi *a, const char *event_id, const char *payment_id, const char *method,
                 const char *decision, long long amount, const char *bank, const char *account,
                 char **json);

/* tadm_drain - POST /admin/dlq/drain?max=@max (0: no max) and CHECK 200 with a drain result. */
bool tadm_drain(const tapi *a, int max, thttp_resp *out);

/* tadm_letter_for - the member of array @letters whose event_id is @event_id (borrowed), NULL. */
json_t *tadm_letter_for(const json_t *letters, const char *event_id);

/* tadm_id - the integer member "id" of @letter, -1 when absent. */
long long tadm_id(const json_t *letter);

/* tadm_is_date_time - @s is an RFC 3339 date-time (with a real calendar date). */
bool tadm_is_date_time(const char *s);

/* tadm_dump - @j as compact JSON for messages (one of 4 rotating buffers per thread, truncated). */
const char *tadm_dump(const json_t *j);

/* ---- PostgreSQL ------------------------------------------------------------------------ */

/* tadm_wait_long - poll @sql (no parameters) until it returns @want or @timeout_ms passes. */
long long tadm_wait_long(tdb *db, const char *sql, long long want, int timeout_ms);

/* tadm_status - the status of payment @payment_id as a new string (free()), NULL when absent. */
char *tadm_status(tdb *db, const char *payment_id);

/* ---- RabbitMQ (on @t's vhost; a connection per call) ----------------------------------- */

/* tadm_depth - ready messages in @queue (passive queue.declare); -1 on error. */
long tadm_depth(const tadm *t, const char *queue);

/* tadm_wait_depth - poll tadm_depth() until it is @want or @timeout_ms passes; the last value. */
long tadm_wait_depth(const tadm *t, const char *queue, long want, int timeout_ms);

/* A raw message: anything a foreign or broken publisher could send. */
typedef struct tadm_raw {
    const char *exchange;    /* "" for the default exchange */
    const char *routing_key; /* a queue name with the default exchange */
    const void *body;
    size_t len;
    const char *message_id; /* NULL: no message_id property */
    int attempt;            /* x-attempt header; 0: no headers at all */
} tadm_raw;

/* tadm_publish - publish @m persistent and mandatory, and wait (5 s) for the broker's ack. */
bool tadm_publish(const tadm *t, const tadm_raw *m);

/* ---- other programs -------------------------------------------------------------------- */

/*
 * tadm_run - run @argv (argv[0] looked up in PATH) in a process group of its
 * own, stdin /dev/null, with the test's environment changed by @env ("K=V"
 * sets, "K" removes; may be NULL). At most @timeout_ms, then the group gets
 * SIGKILL and the result is -1. stdout and stderr together into *@out (new
 * string, free(); may be NULL). Returns the exit status, 128 + a signal, or
 * -1 (timeout, or could not run: status 127 when exec failed).
 */
int tadm_run(const char *const *argv, const char *const *env, int timeout_ms, char **out);

/* ---- base64 ---------------------------------------------------------------------------- */

/* tadm_base64 - standard base64 with padding of @len bytes, a new string (free()). */
char *tadm_base64(const void *data, size_t len);

#endif
