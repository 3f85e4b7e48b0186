/* tests/admin/tadmin.h - admin tests on the e2e fixture: payments-api, admin calls, probes */
#ifndef TESTS_ADMIN_TADMIN_H
#define TESTS_ADMIN_TADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"

#define TADM_DLQ        "payments.settlement.dlq"
#define TADM_SETTLEMENT "payments.settlement"
#define TADM_EVENTS     "payments.events"
#define TADM_DELAYS     "RETRY_DELAYS_MS=200,400" /* attempts 1..3 within a second */

/*
 * An admin test's world is an end-to-end one: te2e_init() makes its database
 * and vhost, te2e_cleanup() removes them, the relay and the worker are tprog.
 * This module adds payments-api, the admin calls and what the tests check.
 */

/* tadm_prog_start - tprog_start() with TADM_DELAYS before @extra. */
bool tadm_prog_start(tprog *p, tprog_kind kind, const char *label, const te2e *t,
                     const char *const *extra);

/*
 * tadm_api_start - payments-api on @t's database with AMQP_URL of @t's vhost,
 * TADM_DELAYS, then @extra; waits for its port and for /readyz 200.
 */
bool tadm_api_start(tapi *a, const te2e *t, const char *label, const char *const *extra);

/* tadm_all_start - relay, worker (with @worker_extra) and api; false when one did not start. */
bool tadm_all_start(const te2e *t, tprog *relay, tprog *worker, tapi *api,
                    const char *const *worker_extra);

/* tadm_all_stop - SIGTERM each of them (those that run) and check exit status 0. */
void tadm_all_stop(tprog *relay, tprog *worker, tapi *api);

/* The worker setting of the tests that need dead letters: bank 237 is down. */
#define TADM_BANK_237_DOWN "BANK_SIM_RULES=237/*:down"

/*
 * tadm_main - the whole main() of an admin test: te2e_main(@name, @t) whose
 * run is tadm_all_start() (CHECKed; the worker with @worker_extra), @tests
 * when all three started, then tadm_all_stop().
 */
int tadm_main(const char *name, te2e *t, tprog *relay, tprog *worker, tapi *api,
              const char *const *worker_extra, void (*tests)(void));

/* ---- HTTP ------------------------------------------------------------------------------ */

/*
 * tadm_call - @method @path on @a with "Authorization: Bearer @token" (NULL:
 * no Authorization). POST sends an empty body. Fills @out (thttp_resp_free()).
 */
bool tadm_call(const tapi *a, const char *method, const char *path, const char *token,
               thttp_resp *out);

/*
 * CHECK_UNAUTHORIZED - @method @path with @token (tadm_call()) is a 401
 * problem "unauthorized", and, when @bearer, carries "WWW-Authenticate: Bearer".
 */
#define CHECK_UNAUTHORIZED(a, method, path, token, bearer)                                         \
    tadm_check_unauthorized_at(__FILE__, __LINE__, (a), (method), (path), (token), (bearer))
bool tadm_check_unauthorized_at(const char *file, int line, const tapi *a, const char *method,
                                const char *path, const char *token, bool bearer);

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

/* tadm_find - the first object in @array whose string @key is @value (borrowed), NULL. */
json_t *tadm_find(const json_t *array, const char *key, const char *value);

/* tadm_letter_for - the member of array @letters whose event_id is @event_id (borrowed), NULL. */
json_t *tadm_letter_for(const json_t *letters, const char *event_id);

/* tadm_id - the integer member "id" of @letter, -1 when absent. */
long long tadm_id(const json_t *letter);

/* tadm_is_date_time - @s is an RFC 3339 date-time (with a real calendar date). */
bool tadm_is_date_time(const char *s);

/* tadm_dump - @j as compact JSON for messages (one of 4 rotating buffers per thread, truncated). */
const char *tadm_dump(const json_t *j);

/* ---- PostgreSQL ------------------------------------------------------------------------ */

/* tadm_status - the status of payment @payment_id as a new string (free()), NULL when absent. */
char *tadm_status(tdb *db, const char *payment_id);

/* ---- RabbitMQ (on @t's vhost; a connection per call) ----------------------------------- */

/* tadm_depth - ready messages in @queue (tmq_depth()); -1 on error. */
long tadm_depth(const te2e *t, const char *queue);

/* tadm_wait_depth - tmq_wait_depth() on a connection of its own. */
long tadm_wait_depth(const te2e *t, const char *queue, long want, int timeout_ms);

/* tadm_publish - tmq_publish() on a connection of its own; true when acked (and, if mandatory,
 * routed). */
bool tadm_publish(const te2e *t, const tmq_pub *p);

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
