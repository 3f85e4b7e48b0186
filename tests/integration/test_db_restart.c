/*
 * tests/integration/test_db_restart.c - PostgreSQL goes away and comes back
 *
 * While the database is down the API answers 503 with Retry-After (never a
 * 202), /readyz says 503 and /healthz 200; once it is back the SAME process
 * accepts again. This stops the shared PostgreSQL ($GW_STACK stop db), so
 * meson runs it alone (is_parallel: false), and the database is always
 * started again: by this test, or by a guard process if this test dies.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"
#include "tests/support/tstack.h"

#define RECOVER_MS 20000

static long long rows_for(tdb *db, const char *event_id)
{
    return tdb_long(db, "SELECT count(*) FROM payments WHERE event_id = $1", event_id, NULL);
}

/* While the database is down: every answer that needs it is a 503. */
static void check_while_down(tapi *a)
{
    char *body = tapi_payment("evt-down", "pay-down");
    thttp_resp r;

    for (int i = 0; i < 3; i++) { /* the pooled connections fail one by one: try several */
        tcheck_context("POST while down, try %d", i);
        tapi_post(a, body, NULL, &r);
        CHECK_PROBLEM(&r, 503, "service-unavailable");
        CHECK_RETRY_AFTER(&r);
        CHECK(r.status != 202);
        thttp_resp_free(&r);
    }
    tcheck_context_clear();
    tapi_get(a, "/v1/payments/pay-before", &r);
    CHECK_INT(r.status, 503);
    CHECK_STR(thttp_header(&r, "Content-Type"), "application/problem+json");
    CHECK_RETRY_AFTER(&r);
    thttp_resp_free(&r);
    thttp_get(a->url, "/readyz", NULL, &r);
    CHECK_INT(r.status, 503);
    thttp_resp_free(&r);
    thttp_get(a->url, "/healthz", NULL, &r); /* the process itself is fine */
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    CHECK(tproc_running(a->proc));
    free(body);
}

/* After the restart: within RECOVER_MS the same process accepts again. */
static void check_recovers(tapi *a, tdb *db, pid_t pid)
{
    char *body = tapi_payment("evt-after", "pay-after");
    long long t0 = tproc_now_ms(), deadline = t0 + RECOVER_MS;
    int unavailable = 0;
    thttp_resp r = {0};

    for (;;) {
        tapi_post(a, body, NULL, &r);
        if (r.status != 503 || tproc_now_ms() >= deadline)
            break;
        unavailable++;
        thttp_resp_free(&r);
        tproc_sleep_ms(200);
    }
    printf("accepting again %lld ms after the restart, after %d answers of 503\n",
           tproc_now_ms() - t0, unavailable);
    CHECK_INT(r.status, 202);
    CHECK(thttp_header(&r, "Idempotent-Replayed") == NULL);
    thttp_resp_free(&r);
    CHECK_INT(tproc_pid(a->proc), pid); /* the same process, not a restarted one */
    CHECK(tproc_running(a->proc));

    thttp_get(a->url, "/readyz", NULL, &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    tapi_get(a, "/v1/payments/pay-before", &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);

    /* nothing of the refused request was committed: sending it now is a first accept */
    CHECK_INT(rows_for(db, "evt-down"), 0);
    free(body);
    body = tapi_payment("evt-down", "pay-down");
    tapi_post(a, body, NULL, &r);
    CHECK_INT(r.status, 202);
    CHECK(thttp_header(&r, "Idempotent-Replayed") == NULL);
    thttp_resp_free(&r);
    CHECK_INT(rows_for(db, "evt-after"), 1);
    CHECK_INT(rows_for(db, "evt-down"), 1);
    free(body);
}

int main(void)
{
    tdb *db;
    tapi a;
    thttp_resp r;
    pid_t pid, guard;
    int done_fd = -1;
    char *body;
    int rc;

    if (tstack_bin() == NULL) {
        printf("SKIP: GW_STACK is not set (this test stops and starts the database)\n");
        return 77;
    }
    rc = tapi_test_init(&db);
    if (rc != 0)
        return rc == 77 ? 77 : tcheck_summary("test_db_restart");
    if (!CHECK(tapi_start(&a, "dbrestart-api", tdb_url(db), NULL))) {
        tapi_test_cleanup(db);
        return tcheck_summary("test_db_restart");
    }
    pid = tproc_pid(a.proc);
    body = tapi_payment("evt-before", "pay-before");
    tapi_post(&a, body, NULL, &r);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);
    free(body);

    guard = tstack_guard_start("db", &done_fd);
    CHECK(guard > 0);
    if (CHECK_INT(tstack_run("stop", "db"), 0))
        check_while_down(&a);
    /* always, whatever failed above */
    CHECK_INT(tstack_run("start", "db"), 0);
    tstack_guard_done(guard, done_fd);

    check_recovers(&a, db, pid);
    tapi_stop(&a);
    tapi_test_cleanup(db);
    return tcheck_summary("test_db_restart");
}
