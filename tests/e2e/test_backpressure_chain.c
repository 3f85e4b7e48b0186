/*
 * tests/e2e/test_backpressure_chain.c - one bounded buffer: a full queue holds, no retry copy is
 * lost
 *
 * payments.settlement has a length limit (SETTLEMENT_MAX_LENGTH=200, reject-publish); the API
 * answers 503 above OUTBOX_MAX_BACKLOG=400. Twenty payments to a bank down for two attempts
 * wait in payments.retry.4000 when the worker stops; then payments are posted until 20 of them
 * were answered 503:
 *   - the queue stops at its limit (the broker nacks the rest), the rows stay pending, and the
 *     API turns to 503 with Retry-After once the backlog passes its limit;
 *   - the retry copies come back into the full queue. A classic queue drops them (it
 *     dead-letters at most once): the relay publishes them again from the outbox after
 *     RETRY_LOST_AFTER_SECONDS=10 (sql/0014). A quorum queue (argument "quorum", in the
 *     cluster suite) keeps them until there is room (at-least-once).
 * When the worker is back, every accepted payment settles exactly once, the twenty on attempt 3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"

#define FLAKY 20
#define BURST 4000 /* at most: the posts stop after the 20th 503 */
#define LIMIT 200

static te2e e;

/* POST payment @id; to the flaky account when @flaky. The HTTP status. */
static long post(const tapi *a, const char *id, bool flaky, bool *retry_after)
{
    char *s = tapi_payment(id, id), *body;
    json_t *o = json_loads(s, 0, NULL);
    thttp_resp r;
    long status;

    free(s);
    if (flaky)
        json_object_set_new(json_object_get(o, "payee"), "account", json_string("9999-1"));
    body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    tapi_post(a, body, NULL, &r);
    status = r.status;
    if (status == 503 && retry_after != NULL)
        *retry_after = tapi_check_retry_after_at(__FILE__, __LINE__, &r);
    thttp_resp_free(&r);
    free(body);
    return status;
}

static void run(void *arg)
{
    bool quorum = strcmp((const char *)arg, "quorum") == 0;
    char amqp[1200];
    const char *env[] = {quorum ? "QUEUE_TYPE=quorum" : "QUEUE_TYPE=classic",
                         "SETTLEMENT_MAX_LENGTH=200",
                         "OUTBOX_MAX_BACKLOG=400",
                         "RETRY_DELAYS_MS=4000,8000",
                         "RETRY_LOST_AFTER_SECONDS=10",
                         "BANK_SIM_RULES=001/9999-1:fail-first=2",
                         amqp,
                         NULL};
    tprog relay = {0}, worker = {0};
    tapi a = {0};
    long long accepted = FLAKY, unavailable = 0, depth;
    bool retry_after = true;
    tmq *m = NULL;
    char id[32];

    snprintf(amqp, sizeof amqp, "AMQP_URL=%s", e.amqp_url);
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "backpressure-relay", &e, env)) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "backpressure-worker", &e, env)) ||
        !CHECK(tapi_start(&a, "backpressure-api", tdb_url(e.db), env)))
        goto out;
    for (int i = 1; i <= FLAKY; i++) {
        snprintf(id, sizeof id, "bp-flaky-%d", i);
        CHECK_INT(post(&a, id, true, NULL), 202);
    }
    /* attempt 1 failed for all twenty: their copies wait 4 s in payments.retry.4000 */
    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM payments WHERE payment_id LIKE 'bp-flaky-%' "
                    "AND status = 'retrying' AND attempts = 1",
                    FLAKY, 10000, 20);
    CHECK_INT(tprog_stop(&worker, 0), 0);

    for (int i = 1; i <= BURST && unavailable < 20; i++) {
        long st;

        snprintf(id, sizeof id, "bp-%d", i);
        st = post(&a, id, false, &retry_after);
        accepted += st == 202;
        unavailable += st == 503;
        CHECK(st == 202 || st == 503);
    }
    printf("posted: %lld accepted, %lld answered 503\n", accepted - FLAKY, unavailable);
    CHECK(unavailable > 0);
    CHECK(retry_after);

    /* the chain holds: the queue at its limit, the rest pending in the outbox */
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL))
        goto out;
    depth = tmq_wait_depth(m, "payments.settlement", LIMIT, 15000);
    tproc_sleep_ms(5000); /* the retry copies' delay is over: they met the full queue */
    depth = tmq_depth(m, "payments.settlement");
    printf("payments.settlement holds %lld; %lld outbox rows pending\n", depth,
           tdb_long(e.db, "SELECT count(*) FROM outbox WHERE state = 'pending'", NULL));
    if (quorum) /* a quorum queue checks its limit before each enqueue: it can pass it by a few */
        CHECK(depth >= LIMIT && depth <= LIMIT + 32);
    else
        CHECK_INT(depth, LIMIT);
    CHECK(tdb_long(e.db, "SELECT count(*) FROM outbox WHERE state = 'pending'", NULL) > 0);
    CHECK(tprog_metric(&relay, "paygw_relay_nacked_total") > 0);
    /* however often the full queue nacked a row, its next publish is at most 5 s away (it
     * doubled to 60 s: the 4th nack put it 8 s away, and the backlog outlived the worker's return)
     */
    CHECK_WAIT_LONG(e.db,
                    "SELECT (max(publish_attempts) >= 4)::int FROM outbox WHERE state = 'pending'",
                    1, 30000, 200);
    CHECK(tdb_long(e.db,
                   "SELECT ceil(extract(epoch FROM max(next_attempt_at) - now())) FROM outbox "
                   "WHERE state = 'pending'",
                   NULL) <= 5);

    if (!CHECK(tprog_start(&worker, TPROG_WORKER, "backpressure-worker2", &e, env)))
        goto out;
    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM payments WHERE payment_id LIKE 'bp-flaky-%' "
                    "AND status = 'settled' AND attempts = 3",
                    FLAKY, 60000, 200);
    /* the backlog drains soon after the worker is back: a row the full queue nacked waits at
     * most 5 s for its next publish (outbox_nacked in worker/relay/outbox.c), the relay's
     * reconnect after a nack at most 10 s. It used to double to 60 s, and outlast this wait. */
    CHECK_WAIT_LONG(e.db, "SELECT count(*) FROM payments WHERE status = 'settled'", accepted, 30000,
                    200);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM payments", NULL), accepted);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), accepted);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2 * accepted);
    CHECK_LEDGER_BALANCED(e.db);
    printf("retry copies published again by the relay: %.0f\n",
           tprog_metric(&relay, "paygw_relay_retries_rearmed_total"));
    if (!quorum) /* at-most-once dead-lettering dropped them: the outbox brought them back */
        CHECK(tprog_metric(&relay, "paygw_relay_retries_rearmed_total") > 0);
out:
    tmq_close(m);
    tapi_stop(&a);
    tprog_stop(&relay, 0);
    tprog_stop(&worker, 0);
}

int main(int argc, char **argv)
{
    const char *type = argc > 1 ? argv[1] : "classic";
    char name[64];

    snprintf(name, sizeof name, "backpressure_chain_%s", type);
    return te2e_main_arg(name, &e, run, (void *)type);
}
