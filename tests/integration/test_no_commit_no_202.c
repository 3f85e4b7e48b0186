/*
 * tests/integration/test_no_commit_no_202.c - a 202 means a COMMIT, and a COMMIT
 * the client never heard about is answered by a replay (openapi/payments.yaml and
 * docs/operations.md, "Failpoints" and docs/failure-matrix.md)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"

static tdb *db;

static void test_failed_commit_is_503(void)
{
    static const char *const fail[] = {"GATEWAY_FAILPOINTS=api.before_commit=error", NULL};
    char *body = tapi_payment("evt-err", "pay-err");
    tapi a;
    thttp_resp r;

    if (!CHECK(tapi_start(&a, "nocommit-error", tdb_url(db), fail))) {
        free(body);
        return;
    }
    for (int i = 0; i < 2; i++) { /* a retry fails the same way, and still writes nothing */
        tapi_post(&a, body, NULL, &r);
        CHECK_PROBLEM(&r, 503, "service-unavailable");
        CHECK_RETRY_AFTER(&r);
        thttp_resp_free(&r);
        CHECK_ROWS(db, "evt-err", 0);
    }
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM payments", NULL), 0);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox", NULL), 0);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM idempotency_keys", NULL), 0);
    /* the rolled-back transaction left the connection usable */
    tapi_get(&a, "/v1/payments/pay-err", &r);
    CHECK_PROBLEM(&r, 404, "not-found");
    thttp_resp_free(&r);
    tapi_stop(&a);
    free(body);
}

static void test_crash_after_commit_then_replay(void)
{
    static const char *const crash[] = {"GATEWAY_FAILPOINTS=api.after_commit=exit", NULL};
    char *body = tapi_payment("evt-crash", "pay-crash");
    tapi a;
    thttp_resp r;
    int status;

    if (!CHECK(tapi_start(&a, "nocommit-crash", tdb_url(db), crash))) {
        free(body);
        return;
    }
    tapi_post(&a, body, NULL, &r);
    /* the process died between COMMIT and the answer: no status at all */
    CHECK_INT(r.status, 0);
    CHECK(r.curl_code != CURLE_OK);
    fprintf(stderr, "expected client error: %s\n", r.error);
    thttp_resp_free(&r);
    status = tproc_wait_exit(a.proc, 10000);
    CHECK_INT(status, 137);
    CHECK(tproc_log_contains(a.proc, "event=failpoint_exit"));
    tproc_free(a.proc);
    a.proc = NULL;
    CHECK_ROWS(db, "evt-crash", 1); /* committed before the crash */

    /* the client retries with the same event against a healthy API: a replay */
    if (!CHECK(tapi_start(&a, "nocommit-restart", tdb_url(db), NULL))) {
        free(body);
        return;
    }
    tapi_post(&a, body, NULL, &r);
    CHECK_ACCEPTED(&r, "evt-crash", "pay-crash", true);
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-crash", 1);
    tapi_get(&a, "/v1/payments/pay-crash", &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(thttp_json_str(&r, "status"), "accepted");
    thttp_resp_free(&r);
    tapi_stop(&a);
    free(body);
}

static void run(void)
{
    TRUN(test_failed_commit_is_503);
    TRUN(test_crash_after_commit_then_replay);
}

int main(void)
{
    return tapi_main("test_no_commit_no_202", &db, NULL, NULL, run);
}
