/*
 * tests/admin/test_admin_drain_crash.c - a crash between the drain's COMMIT and its ack
 *
 * docs/architecture.md: "reads the DLQ, stores each message ... commits, then
 * acks"; a crash anywhere may cause a repeat, never a loss. One dead letter
 * (a PIX of R$ 0) waits in the DLQ. payments-api runs with
 * GATEWAY_FAILPOINTS=admin.after_commit=exit: the drain request sees the
 * connection drop, the API exits 137, the letter is committed in dead_letters
 * and the message is back in the DLQ (never acked). A new API without
 * failpoints drains it again: the same letter (same id), still one row, and
 * the DLQ is empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"

#define WAIT_MS 30000

static te2e t;
static tapi api;
static tprog relay, worker;

static void crash_then_drain_again(void)
{
    const char *failpoint[] = {"GATEWAY_FAILPOINTS=admin.after_commit=exit", NULL};
    long long first_id, status;
    char *first_death = NULL, *s;
    thttp_resp r;
    json_t *l;

    if (!tadm_accept(&api, "evt-crash", "pay-crash", "pix", "approved", 0, "001", "1234-5", NULL))
        return;
    if (!CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, WAIT_MS), 1))
        return;

    /* the accepting API had no failpoint; the draining one has */
    tapi_stop(&api);
    if (!CHECK(tadm_api_start(&api, &t, "drain_crash-api-failpoint", failpoint)))
        return;
    tadm_admin(&api, "POST", "/admin/dlq/drain?max=10", &r);
    tcheck_context("the drain that crashes: HTTP %ld, curl %d (%s)", r.status, (int)r.curl_code,
                   r.error);
    CHECK_INT(r.status, 0); /* no answer: the connection dropped */
    CHECK(r.curl_code != CURLE_OK);
    tcheck_context_clear();
    thttp_resp_free(&r);
    status = tproc_wait_exit(api.proc, 10000);
    CHECK_INT(status, 137);
    tproc_free(api.proc);
    api.proc = NULL;

    /* committed, not acked */
    CHECK_INT(tdb_long(t.db, "SELECT count(*) FROM dead_letters", NULL), 1);
    first_id = tdb_long(t.db, "SELECT id FROM dead_letters", NULL);
    CHECK(first_id >= 1);
    first_death = tdb_value(t.db, "SELECT x_death::text FROM dead_letters", NULL);
    s = tdb_value(t.db, "SELECT event_id FROM dead_letters", NULL);
    CHECK_STR(s, "evt-crash");
    free(s);
    /* the broker gives the unacked message back when the connection goes */
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, 10000), 1);

    if (!CHECK(tadm_api_start(&api, &t, "drain_crash-api-again", NULL)))
        goto out;
    if (tadm_drain(&api, 10, &r)) {
        CHECK_INT(json_integer_value(json_object_get(r.json, "drained")), 1);
        CHECK_INT(json_array_size(json_object_get(r.json, "messages")), 1);
        l = json_array_get(json_object_get(r.json, "messages"), 0);
        tcheck_context("the letter drained again: %s", tadm_dump(l));
        CHECK_INT(tadm_id(l), first_id);
        CHECK_STR(json_string_value(json_object_get(l, "event_id")), "evt-crash");
        CHECK_INT(json_integer_value(json_object_get(l, "attempt")), 1);
        CHECK_STR(json_string_value(json_object_get(l, "first_death_reason")), "rejected");
        tcheck_context_clear();
    }
    thttp_resp_free(&r);
    CHECK_INT(tdb_long(t.db, "SELECT count(*) FROM dead_letters", NULL), 1);
    s = tdb_value(t.db, "SELECT x_death::text FROM dead_letters", NULL);
    CHECK_STR(s, first_death);
    free(s);
    CHECK_INT(tadm_depth(&t, TADM_DLQ), 0);

    /* and it is the one the list shows */
    tadm_admin(&api, "GET", "/admin/dlq", &r);
    if (CHECK_INT(r.status, 200)) {
        json_t *items = json_object_get(r.json, "items");
        CHECK_INT(json_array_size(items), 1);
        CHECK_INT(tadm_id(json_array_get(items, 0)), first_id);
    }
    thttp_resp_free(&r);
    s = tadm_status(t.db, "pay-crash");
    CHECK_STR(s, "dead_lettered");
    free(s);
out:
    free(first_death);
}

static void tests(void)
{
    TRUN(crash_then_drain_again);
}

int main(void)
{
    return tadm_main("admin_drain_crash", &t, &relay, &worker, &api, NULL, tests);
}
