/*
 * tests/admin/test_admin_reconciliation.c - GET /admin/reconciliation against openapi/payments.yaml
 *
 * Through the real flow: three payments settle, two refused decisions come
 * back unroutable, an R$ 0 one and one to a bank that is down dead-letter.
 * The report's by_status counts and amount sums equal the database's and
 * every check is ok. Then each invariant is broken by hand and its check goes
 * ok false with exactly the offending ids:
 *   - a ledger line of a settled payment deleted: settled_payments_have_one_balanced_effect
 *   - a ledger line for a dead-lettered payment: ledger_only_for_settled
 *   - the inbox row of a settled payment deleted: inbox_matches_settled
 *   - a payment `accepted` two minutes ago (RELAY_SLO_SECONDS defaults to 60):
 *     no_stale_accepted (one accepted just now is not stale)
 * and 25 stale ones list 20 offenders with truncated true.
 *
 * The ledger checks read the events written since the checkpoint of the last
 * clean report (sql/0020): a clean report moves it to its horizon less five
 * minutes, a failing one leaves it; a settled payment stamped an hour old and
 * without its ledger lines is not read by the next report, and ?full=true
 * finds it. (reconciliation_horizon() and open transactions:
 * tests/integration/test_function_grants.c.)
 *
 * Last, a SIGTERM while a report waits (on a lock held on payments): the API
 * cancels the report, answers the request 503 and exits 0 within tapi_stop()'s
 * bound, although the report's statement timeout is ten minutes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "tests/admin/tadmin.h"

#define WAIT_MS 30000

static te2e t;
static tapi api;
static tprog relay, worker;

static const char *const check_names[] = {
    "settled_payments_have_one_balanced_effect",
    "ledger_only_for_settled",
    "inbox_matches_settled",
    "no_stale_accepted",
};
#define NCHECKS (sizeof check_names / sizeof check_names[0])

static json_t *report_at(const char *path)
{
    thttp_resp r;
    json_t *j = NULL;

    tadm_admin(&api, "GET", path, &r);
    tcheck_context("GET /admin/reconciliation: %.600s", r.body);
    if (CHECK_INT(r.status, 200) && CHECK(json_is_object(r.json))) {
        CHECK_STR(thttp_header(&r, "Content-Type"), "application/json");
        j = json_incref(r.json);
    }
    tcheck_context_clear();
    thttp_resp_free(&r);
    return j;
}

static json_t *report(void)
{
    return report_at("/admin/reconciliation");
}

/* The checkpoint as seconds before now(); a large number for '-infinity'. */
static long long checkpoint_age_s(void)
{
    return tdb_long(t.db,
                    "SELECT CASE WHEN verified_before = '-infinity' THEN 999999999 ELSE "
                    "extract(epoch FROM now() - verified_before)::bigint END "
                    "FROM reconciliation_checkpoint",
                    NULL);
}

static json_t *check_of(const json_t *rep, const char *name)
{
    return tadm_find(json_object_get(rep, "checks"), "name", name);
}

/* by_status equals the database's GROUP BY, status for status. */
static void check_totals(const json_t *rep)
{
    const json_t *by = json_object_get(rep, "by_status");
    long long statuses = tdb_long(t.db, "SELECT count(DISTINCT status) FROM payments", NULL);
    const char *status;
    json_t *v;

    tcheck_context("by_status %s", tadm_dump(by));
    if (!CHECK(json_is_object(by)))
        goto out;
    CHECK_INT(json_object_size(by), statuses);
    json_object_foreach((json_t *)by, status, v)
    {
        long long n =
            tdb_long(t.db, "SELECT count(*) FROM payments WHERE status = $1", status, NULL);
        long long sum =
            tdb_long(t.db, "SELECT coalesce(sum(amount_cents), 0) FROM payments WHERE status = $1",
                     status, NULL);

        tcheck_context("by_status.%s = %s", status, tadm_dump(v));
        CHECK_INT(json_object_size(v), 2);
        CHECK(json_is_integer(json_object_get(v, "count")));
        CHECK(json_is_integer(json_object_get(v, "amount_cents")));
        CHECK_INT(json_integer_value(json_object_get(v, "count")), n);
        CHECK_INT(json_integer_value(json_object_get(v, "amount_cents")), sum);
    }
out:
    tcheck_context_clear();
}

/* Check @name is ok == (@offenders == NULL), with exactly the offenders given (NULL-terminated). */
static void check_one(const json_t *rep, const char *name, const char *const *offenders)
{
    json_t *c = check_of(rep, name), *off = json_object_get(c, "offending");
    size_t want = 0;

    tcheck_context("check %s", tadm_dump(c));
    if (!CHECK(c != NULL))
        goto out;
    for (const char *const *o = offenders; o != NULL && *o != NULL; o++)
        want++;
    CHECK(json_is_boolean(json_object_get(c, "ok")));
    CHECK_INT(json_is_true(json_object_get(c, "ok")), want == 0);
    CHECK(json_is_false(json_object_get(c, "truncated")));
    CHECK(json_is_string(json_object_get(c, "detail")));
    if (!CHECK(json_is_array(off)))
        goto out;
    CHECK_INT(json_array_size(off), want);
    for (const char *const *o = offenders; o != NULL && *o != NULL; o++) {
        bool found = false;
        for (size_t i = 0; i < json_array_size(off); i++)
            found |= json_is_string(json_array_get(off, i)) &&
                     strcmp(json_string_value(json_array_get(off, i)), *o) == 0;
        tcheck_context("check %s: offender %s", name, *o);
        CHECK(found);
    }
out:
    tcheck_context_clear();
}

static void flow_then_all_ok(void)
{
    json_t *rep;

    if (!tadm_accept(&api, "evt-s1", "pay-s1", "pix", "approved", 1000, "001", "1234-5", NULL) ||
        !tadm_accept(&api, "evt-s2", "pay-s2", "ted", "approved", 2500, "033", "9-1", NULL) ||
        !tadm_accept(&api, "evt-s3", "pay-s3", "card", "approved", 333, "104", "42-0", NULL) ||
        !tadm_accept(&api, "evt-r1", "pay-r1", "pix", "refused", 700, "001", "1234-5", NULL) ||
        !tadm_accept(&api, "evt-r2", "pay-r2", "ted", "refused", 800, "001", "1234-5", NULL) ||
        !tadm_accept(&api, "evt-z", "pay-z", "pix", "approved", 0, "001", "1234-5", NULL) ||
        !tadm_accept(&api, "evt-d", "pay-d", "ted", "approved", 9900, "237", "5555-0", NULL))
        return;
    CHECK_WAIT_LONG(t.db, "SELECT count(*) FROM payments WHERE status = 'settled'", 3, WAIT_MS, 25);
    CHECK_WAIT_LONG(t.db, "SELECT count(*) FROM payments WHERE status = 'unroutable'", 2, WAIT_MS,
                    25);
    CHECK_WAIT_LONG(t.db, "SELECT count(*) FROM payments WHERE status = 'dead_lettered'", 2,
                    WAIT_MS, 25);

    rep = report();
    if (rep == NULL)
        return;
    check_totals(rep);
    tcheck_context("report %s", tadm_dump(rep));
    CHECK_INT(json_object_size(rep), 3);
    CHECK(json_is_true(json_object_get(rep, "ok")));
    CHECK_INT(json_array_size(json_object_get(rep, "checks")), NCHECKS);
    CHECK_INT(json_integer_value(json_object_get(
                  json_object_get(json_object_get(rep, "by_status"), "settled"), "amount_cents")),
              3833);
    CHECK_INT(json_integer_value(json_object_get(
                  json_object_get(json_object_get(rep, "by_status"), "unroutable"), "count")),
              2);
    tcheck_context_clear();
    for (size_t i = 0; i < NCHECKS; i++)
        check_one(rep, check_names[i], NULL);
    json_decref(rep);
    /* clean: the checkpoint moved from -infinity to the horizon (about now) less 300 s */
    tcheck_context("checkpoint %lld s old", checkpoint_age_s());
    CHECK(checkpoint_age_s() >= 300 && checkpoint_age_s() <= 330);
    tcheck_context_clear();
}

/* What the window reads, what ?full=true reads, and when the checkpoint moves. */
static void window_then_full(void)
{
    static const char *const old_pay[] = {"pay-old-settled", NULL};
    static const char *const old_evt[] = {"evt-old-settled", NULL};
    char *before, *after;
    json_t *rep;
    thttp_resp r;

    /* settled an hour ago by its stamps, with no ledger line and no inbox row */
    CHECK(tdb_exec(t.db,
                   "INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, "
                   "currency, payee_bank, payee_account, status, created_at, updated_at, "
                   "settled_at) VALUES ('pay-old-settled', 'evt-old-settled', 'pix', 'approved', "
                   "5100, 'BRL', '001', '1234-5', 'settled', now() - interval '1 hour', "
                   "now() - interval '1 hour', now() - interval '1 hour')",
                   NULL));
    rep = report();
    if (rep != NULL) { /* written before the checkpoint: not read */
        tcheck_context("windowed report %s", tadm_dump(rep));
        CHECK(json_is_true(json_object_get(rep, "ok")));
        CHECK(strstr(json_string_value(json_object_get(
                         check_of(rep, "settled_payments_have_one_balanced_effect"), "detail")),
                     "written since") != NULL);
        tcheck_context_clear();
    }
    json_decref(rep);

    before = tdb_value(t.db, "SELECT verified_before::text FROM reconciliation_checkpoint", NULL);
    rep = report_at("/admin/reconciliation?full=true");
    if (rep != NULL) {
        CHECK(json_is_false(json_object_get(rep, "ok")));
        check_one(rep, "settled_payments_have_one_balanced_effect", old_pay);
        check_one(rep, "ledger_only_for_settled", NULL);
        check_one(rep, "inbox_matches_settled", old_evt);
        check_one(rep, "no_stale_accepted", NULL);
        CHECK(strstr(json_string_value(
                         json_object_get(check_of(rep, "inbox_matches_settled"), "detail")),
                     "every event") != NULL);
    }
    json_decref(rep);
    /* a failing report leaves the checkpoint where it was */
    after = tdb_value(t.db, "SELECT verified_before::text FROM reconciliation_checkpoint", NULL);
    CHECK(before != NULL && after != NULL && strcmp(before, after) == 0);
    free(before);
    free(after);

    /* mended: a full report is clean and moves the checkpoint */
    CHECK(
        tdb_exec(t.db, "UPDATE reconciliation_checkpoint SET verified_before = '-infinity'", NULL));
    CHECK(tdb_exec(t.db, "DELETE FROM payments WHERE payment_id = 'pay-old-settled'", NULL));
    rep = report_at("/admin/reconciliation?full=true");
    if (rep != NULL)
        CHECK(json_is_true(json_object_get(rep, "ok")));
    json_decref(rep);
    CHECK(checkpoint_age_s() >= 300 && checkpoint_age_s() <= 330);

    tadm_admin(&api, "GET", "/admin/reconciliation?full=yes", &r);
    CHECK_PROBLEM(&r, 422, "validation-failed");
    thttp_resp_free(&r);
}

static void broken_invariants(void)
{
    static const char *const s1[] = {"pay-s1", NULL};
    static const char *const z[] = {"pay-z", NULL};
    static const char *const s2[] = {"evt-s2", NULL};
    static const char *const stale[] = {"pay-stale", NULL};
    json_t *rep;

    /* the relay and the worker stay out of the way of the hand-made rows */
    tprog_stop(&relay, 0);
    tprog_stop(&worker, 0);
    CHECK(tdb_exec(t.db,
                   "DELETE FROM ledger_entries WHERE id = (SELECT min(id) FROM ledger_entries "
                   "WHERE payment_id = 'pay-s1')",
                   NULL));
    CHECK(tdb_exec(t.db,
                   "INSERT INTO ledger_entries (event_id, payment_id, account, side, "
                   "amount_cents) VALUES ('evt-z', 'pay-z', 'clearing:pix', 'debit', 0)",
                   NULL));
    CHECK(tdb_exec(t.db, "DELETE FROM inbox WHERE event_id = 'evt-s2'", NULL));
    CHECK(tdb_exec(t.db,
                   "INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, "
                   "currency, payee_bank, payee_account, status, created_at, updated_at) VALUES "
                   "('pay-stale', 'evt-stale', 'pix', 'approved', 4200, 'BRL', '001', '1234-5', "
                   "'accepted', now() - interval '2 minutes', now() - interval '2 minutes'), "
                   "('pay-fresh', 'evt-fresh', 'pix', 'approved', 4300, 'BRL', '001', '1234-5', "
                   "'accepted', now(), now())",
                   NULL));

    rep = report();
    if (rep == NULL)
        return;
    check_totals(rep);
    CHECK(json_is_false(json_object_get(rep, "ok")));
    check_one(rep, "settled_payments_have_one_balanced_effect", s1);
    check_one(rep, "ledger_only_for_settled", z);
    check_one(rep, "inbox_matches_settled", s2);
    check_one(rep, "no_stale_accepted", stale);
    json_decref(rep);

    /* many offenders: at most 20 listed, and truncated says there are more */
    CHECK(tdb_exec(t.db,
                   "INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, "
                   "currency, payee_bank, payee_account, status, created_at) "
                   "SELECT 'pay-old-' || g, 'evt-old-' || g, 'pix', 'approved', g, 'BRL', '001', "
                   "'1234-5', 'accepted', now() - interval '1 hour' FROM generate_series(1, 25) g",
                   NULL));
    rep = report();
    if (rep != NULL) {
        json_t *c = check_of(rep, "no_stale_accepted");

        check_totals(rep);
        tcheck_context("check %s", tadm_dump(c));
        CHECK(json_is_false(json_object_get(c, "ok")));
        CHECK_INT(json_array_size(json_object_get(c, "offending")), 20);
        CHECK(json_is_true(json_object_get(c, "truncated")));
        tcheck_context_clear();
    }
    json_decref(rep);
}

static void auth(void)
{
    thttp_resp r;

    CHECK_UNAUTHORIZED(&api, "GET", "/admin/reconciliation", TAPI_TOKEN, true);
    CHECK_UNAUTHORIZED(&api, "GET", "/admin/reconciliation", NULL, false);
    tadm_admin(&api, "POST", "/admin/reconciliation", &r);
    CHECK_PROBLEM(&r, 405, "method-not-allowed");
    thttp_resp_free(&r);
}

static void *get_full_report(void *arg)
{
    tadm_admin(&api, "GET", "/admin/reconciliation?full=true", arg);
    return NULL;
}

static void stop_during_a_report(void)
{
    PGconn *holder = PQconnectdb(tdb_url(t.db));
    thttp_resp r = {0};
    pthread_t tid;
    PGresult *res;

    if (!CHECK(PQstatus(holder) == CONNECTION_OK))
        goto out;
    PQclear(PQexec(holder, "BEGIN"));
    res = PQexec(holder, "LOCK TABLE payments IN ACCESS EXCLUSIVE MODE");
    CHECK(PQresultStatus(res) == PGRES_COMMAND_OK);
    PQclear(res);
    if (!CHECK(pthread_create(&tid, NULL, get_full_report, &r) == 0))
        goto out;
    CHECK_WAIT_LONG(t.db,
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                    "'payments-api-reconcile' AND wait_event_type = 'Lock'",
                    1, 10000, 50);
    tapi_stop(&api); /* SIGTERM; CHECKs exit status 0 within its bound (12 s) */
    pthread_join(tid, NULL);
    CHECK_PROBLEM(&r, 503, "service-unavailable");
    thttp_resp_free(&r);
out:
    PQclear(PQexec(holder, "ROLLBACK"));
    PQfinish(holder);
}

static void tests(void)
{
    TRUN(flow_then_all_ok);
    TRUN(window_then_full);
    TRUN(broken_invariants);
    TRUN(auth);
    TRUN(stop_during_a_report); /* last: it stops the API */
}

int main(void)
{
    static const char *const worker_env[] = {TADM_BANK_237_DOWN, NULL};

    return tadm_main("admin_reconciliation", &t, &relay, &worker, &api, worker_env, tests);
}
