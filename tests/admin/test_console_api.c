/*
 * tests/admin/test_console_api.c - the operator console's server side (docs/console.md)
 *
 * - The console's files come with the CSP and need no credential; /admin/ui redirects.
 * - Without a session every console call is 401, with the API token too; a login with a
 *   wrong token is 401; the cookie is HttpOnly, SameSite=Strict, Path=/admin (Secure behind
 *   TLS); a change without the session's X-CSRF-Token is 403.
 * - Dead letters of two causes (R$ 0, bank 237 down) are two groups with the right counts;
 *   search by payment_id, error text and group.
 * - A replay job for a group: every letter replayed once, recorded with the operator and
 *   the job; the same group again has nothing left (422); a selection with a replayed
 *   letter reports already_replayed.
 * - A job survives a SIGKILL of payments-api: the next one finishes it, and each letter is
 *   published once (one more at most: the letter in flight), counted in payments.settlement
 *   while no worker runs.
 * - A group of 10,000 letters completes as one job, each letter published once.
 * - Logout: the cookie is cleared and the session refused.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"

#define WAIT_MS  30000
#define BULK     10000
#define RESTARTS 60

static te2e t;
static tapi api;
static tprog relay, worker;

/* A console session: its cookie ("paygw_admin=...") and CSRF token. */
static char cookie[128], csrf[80];
static char zero_group[64], down_group[64], bulk_group[64];
static long long zero_letter;

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static long long jint(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/*
 * @method @path with the session's cookie when @with_cookie, its CSRF token when @with_csrf,
 * the bearer @token when not NULL, and @body as JSON when not NULL.
 */
static void call(const char *method, const char *path, bool with_cookie, bool with_csrf,
                 const char *token, const char *body, thttp_resp *out)
{
    char url[512], c[160], x[120], auth[128];
    const char *headers[6];
    int n = 0;

    snprintf(url, sizeof url, "%s%s", api.url, path);
    if (with_cookie) {
        snprintf(c, sizeof c, "Cookie: %s", cookie);
        headers[n++] = c;
    }
    if (with_csrf) {
        snprintf(x, sizeof x, "X-CSRF-Token: %s", csrf);
        headers[n++] = x;
    }
    if (token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        headers[n++] = auth;
    }
    if (body != NULL)
        headers[n++] = "Content-Type: application/json";
    headers[n] = NULL;
    thttp_request(method, url, headers, body, body ? strlen(body) : 0, out);
}

static void console_get(const char *path, thttp_resp *out)
{
    call("GET", path, true, false, NULL, NULL, out);
}

static void console_post(const char *path, const char *body, thttp_resp *out)
{
    call("POST", path, true, true, NULL, body, out);
}

/* POST /admin/session with @token and @operator; extra header @h (may be NULL). */
static void login_as(const char *token, const char *operator, const char * h, thttp_resp *out)
{
    char url[256], body[256];
    const char *headers[] = {"Content-Type: application/json", h, NULL};

    snprintf(url, sizeof url, "%s/admin/session", api.url);
    snprintf(body, sizeof body, "{\"token\":\"%s\",\"operator\":\"%s\"}", token, operator);
    thttp_request("POST", url, headers, body, strlen(body), out);
}

static bool log_in(const char *operator)
{
    thttp_resp r;
    const char *set;
    bool ok = false;

    login_as(TAPI_ADMIN_TOKEN, operator, NULL, &r);
    set = thttp_header(&r, "Set-Cookie");
    if (CHECK_INT(r.status, 201) && CHECK(set != NULL) && CHECK(thttp_json_str(&r, "csrf"))) {
        snprintf(cookie, sizeof cookie, "%.*s", (int)strcspn(set, ";"), set);
        snprintf(csrf, sizeof csrf, "%s", thttp_json_str(&r, "csrf"));
        ok = true;
    }
    thttp_resp_free(&r);
    return ok;
}

/* ---------------------------------------------------------------- the files */

static void ui_files(void)
{
    const char *csp;
    thttp_resp r;

    call("GET", "/admin/ui/", false, false, NULL, NULL, &r);
    CHECK_INT(r.status, 200);
    CHECK_CONTAINS(thttp_header(&r, "Content-Type"), "text/html");
    csp = thttp_header(&r, "Content-Security-Policy");
    CHECK_CONTAINS(csp, "script-src 'self'");
    CHECK_CONTAINS(csp, "frame-ancestors 'none'");
    CHECK_NOT_CONTAINS(csp, "unsafe-inline");
    CHECK_STR(thttp_header(&r, "X-Content-Type-Options"), "nosniff");
    /* nothing from another origin */
    CHECK_NOT_CONTAINS(r.body, "http://");
    CHECK_NOT_CONTAINS(r.body, "https://");
    thttp_resp_free(&r);

    call("GET", "/admin/ui/app.js", false, false, NULL, NULL, &r);
    CHECK_INT(r.status, 200);
    CHECK_CONTAINS(thttp_header(&r, "Content-Type"), "text/javascript");
    thttp_resp_free(&r);
    /* escaped, so the client sends it as it is and the server decodes it: never a file
     * outside the console's list */
    call("GET", "/admin/ui/%2e%2e/routes.c", false, false, NULL, NULL, &r);
    CHECK_INT(r.status, 404);
    thttp_resp_free(&r);
    call("GET", "/admin/ui", false, false, NULL, NULL, &r);
    CHECK_INT(r.status, 308);
    CHECK_STR(thttp_header(&r, "Location"), "/admin/ui/");
    thttp_resp_free(&r);
}

/* ---------------------------------------------------------------- credentials */

static void refused_without_a_session(void)
{
    static const char *const calls[][2] = {
        {"GET", "/admin/session"},    {"DELETE", "/admin/session"}, {"GET", "/admin/overview"},
        {"GET", "/admin/dlq/groups"}, {"GET", "/admin/dlq?q=x"},    {"GET", "/admin/replays"},
        {"GET", "/admin/replays/1"},  {"POST", "/admin/replays"},   {"POST", "/admin/dlq/drain"},
    };
    thttp_resp r;

    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        tcheck_context("%s %s", calls[i][0], calls[i][1]);
        call(calls[i][0], calls[i][1], false, false, NULL, NULL, &r);
        tapi_check_problem_at(__FILE__, __LINE__, &r, 401, "unauthorized");
        thttp_resp_free(&r);
        call(calls[i][0], calls[i][1], false, false, TAPI_TOKEN, NULL, &r);
        tapi_check_problem_at(__FILE__, __LINE__, &r, 401, "unauthorized");
        thttp_resp_free(&r);
    }
    tcheck_context_clear();

    login_as("not-the-admin-token", "alice", NULL, &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 401, "unauthorized");
    CHECK(thttp_header(&r, "Set-Cookie") == NULL);
    thttp_resp_free(&r);
    login_as(TAPI_TOKEN, "alice", NULL, &r); /* the API token opens no console */
    tapi_check_problem_at(__FILE__, __LINE__, &r, 401, "unauthorized");
    thttp_resp_free(&r);
    login_as(TAPI_ADMIN_TOKEN, "<b>x</b>", NULL, &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 422, "validation-failed");
    thttp_resp_free(&r);
}

static void cookie_and_csrf(void)
{
    thttp_resp r;
    const char *set;

    login_as(TAPI_ADMIN_TOKEN, "bob", "X-Forwarded-Proto: https", &r);
    CHECK_INT(r.status, 201);
    CHECK_CONTAINS(thttp_header(&r, "Set-Cookie"), "; Secure");
    thttp_resp_free(&r);

    login_as(TAPI_ADMIN_TOKEN, "alice", NULL, &r);
    set = thttp_header(&r, "Set-Cookie");
    CHECK_CONTAINS(set, "paygw_admin=");
    CHECK_CONTAINS(set, "HttpOnly");
    CHECK_CONTAINS(set, "SameSite=Strict");
    CHECK_CONTAINS(set, "Path=/admin");
    CHECK_NOT_CONTAINS(set, "Secure");
    CHECK_STR(thttp_json_str(&r, "operator"), "alice");
    CHECK_NOT_CONTAINS(r.body, TAPI_ADMIN_TOKEN);
    thttp_resp_free(&r);

    if (!CHECK(log_in("alice")))
        return;
    console_get("/admin/session", &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(thttp_json_str(&r, "csrf"), csrf);
    CHECK_STR(thttp_json_str(&r, "operator"), "alice");
    thttp_resp_free(&r);

    /* a change needs the CSRF token: none, or a wrong one, is 403 and changes nothing */
    call("POST", "/admin/dlq/drain", true, false, NULL, NULL, &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 403, "csrf-token-required");
    thttp_resp_free(&r);
    call("POST", "/admin/replays", true, false, NULL, "{\"ids\":[1]}", &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 403, "csrf-token-required");
    thttp_resp_free(&r);
    call("DELETE", "/admin/session", true, false, NULL, NULL, &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 403, "csrf-token-required");
    thttp_resp_free(&r);
    {
        char url[256], c[160];
        const char *h[] = {c, "X-CSRF-Token: 0000", NULL};
        snprintf(url, sizeof url, "%s/admin/dlq/drain", api.url);
        snprintf(c, sizeof c, "Cookie: %s", cookie);
        thttp_request("POST", url, h, NULL, 0, &r);
        tapi_check_problem_at(__FILE__, __LINE__, &r, 403, "csrf-token-required");
        thttp_resp_free(&r);
    }
    console_get("/admin/session", &r); /* still logged in */
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
}

/* ---------------------------------------------------------------- groups, search */

static void make_letters(void)
{
    char ev[64], pay[64];
    thttp_resp r;
    json_t *g;
    size_t i;

    for (int k = 1; k <= 3; k++) {
        snprintf(ev, sizeof ev, "evt-console-zero-%d", k);
        snprintf(pay, sizeof pay, "pay-console-zero-%d", k);
        tadm_accept(&api, ev, pay, "pix", "approved", 0, "001", "1234-5", NULL);
    }
    for (int k = 1; k <= 2; k++) {
        snprintf(ev, sizeof ev, "evt-console-down-%d", k);
        snprintf(pay, sizeof pay, "pay-console-down-%d", k);
        tadm_accept(&api, ev, pay, "ted", "approved", 5000, "237", "9999-1", NULL);
    }
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 5, WAIT_MS), 5);
    console_post("/admin/dlq/drain", NULL, &r);
    CHECK_INT(r.status, 200);
    CHECK_INT(jint(r.json, "drained"), 5);
    thttp_resp_free(&r);

    console_get("/admin/dlq/groups", &r);
    CHECK_INT(r.status, 200);
    json_array_foreach(json_object_get(r.json, "groups"), i, g)
    {
        const char *err = jstr(g, "error");
        if (err != NULL && strstr(err, "zero") != NULL) {
            snprintf(zero_group, sizeof zero_group, "%s", jstr(g, "key"));
            CHECK_INT(jint(g, "count"), 3);
            CHECK_INT(jint(g, "not_replayed"), 3);
            CHECK_STR(jstr(g, "reason"), "rejected");
            CHECK(tadm_is_date_time(jstr(g, "first_seen")));
            CHECK(tadm_is_date_time(jstr(g, "last_seen")));
        } else if (err != NULL && strstr(err, "unavailable") != NULL) {
            snprintf(down_group, sizeof down_group, "%s", jstr(g, "key"));
            CHECK_INT(jint(g, "count"), 2);
        }
    }
    CHECK_INT((long long)json_array_size(json_object_get(r.json, "groups")), 2);
    CHECK(zero_group[0] != '\0' && down_group[0] != '\0');
    thttp_resp_free(&r);
}

/* GET /admin/dlq?@query: how many letters came back. */
static long long found(const char *query)
{
    char path[256];
    thttp_resp r;
    long long n;

    snprintf(path, sizeof path, "/admin/dlq?%s", query);
    console_get(path, &r);
    CHECK_INT(r.status, 200);
    n = (long long)json_array_size(json_object_get(r.json, "items"));
    if (n == 1 && strstr(query, "payment_id=") != NULL)
        zero_letter = tadm_id(json_array_get(json_object_get(r.json, "items"), 0));
    thttp_resp_free(&r);
    return n;
}

static void search(void)
{
    char q[96];

    CHECK_INT(found("payment_id=pay-console-zero-2"), 1);
    CHECK_INT(found("event_id=evt-console-down-1"), 1);
    CHECK_INT(found("q=AMOUNT%20IS"), 3); /* error text, any case */
    CHECK_INT(found("q=console-down"), 2);
    CHECK_INT(found("q=nothing-like-this"), 0);
    snprintf(q, sizeof q, "group=%s", down_group);
    CHECK_INT(found(q), 2);
    CHECK_INT(found("payment_id=pay-console-zero-2"), 1); /* sets zero_letter */
}

/* Poll GET /admin/replays/@job until done (or @timeout_ms); the job object (owned) or NULL. */
static json_t *await_job(long long job, int timeout_ms)
{
    long long until = tproc_now_ms() + timeout_ms;
    char path[64];
    json_t *out = NULL;
    thttp_resp r;

    snprintf(path, sizeof path, "/admin/replays/%lld?limit=1000", job);
    while (out == NULL && tproc_now_ms() < until) {
        console_get(path, &r);
        if (r.status == 200 && strcmp(jstr(json_object_get(r.json, "job"), "status"), "done") == 0)
            out = json_incref(r.json);
        thttp_resp_free(&r);
        if (out == NULL)
            tproc_sleep_ms(200);
    }
    CHECK(out != NULL);
    return out;
}

static long long start_job(const char *body, long long want_total)
{
    thttp_resp r;
    long long job;

    console_post("/admin/replays", body, &r);
    CHECK_INT(r.status, 202);
    CHECK_INT(jint(r.json, "total"), want_total);
    job = jint(r.json, "id");
    thttp_resp_free(&r);
    return job;
}

static void replay_a_group(void)
{
    char body[128], path[64];
    json_t *done, *l;
    thttp_resp r;
    long long job;
    size_t i;

    snprintf(body, sizeof body, "{\"group\":\"%s\"}", zero_group);
    job = start_job(body, 3);
    if ((done = await_job(job, WAIT_MS)) == NULL)
        return;
    CHECK_INT(jint(json_object_get(done, "job"), "replayed"), 3);
    CHECK_INT(jint(json_object_get(done, "job"), "failed"), 0);
    CHECK_STR(jstr(json_object_get(done, "job"), "requested_by"), "alice");
    CHECK_INT((long long)json_array_size(json_object_get(done, "letters")), 3);
    json_array_foreach(json_object_get(done, "letters"), i, l)
        CHECK_STR(jstr(l, "result"), "replayed");
    json_decref(done);

    snprintf(path, sizeof path, "/admin/dlq/%lld", zero_letter);
    console_get(path, &r);
    CHECK_STR(jstr(json_object_get(r.json, "replay"), "by"), "alice");
    snprintf(path, sizeof path, "%lld", job);
    CHECK_STR(jstr(json_object_get(r.json, "replay"), "job"), path);
    thttp_resp_free(&r);

    /* nothing left in the group */
    console_post("/admin/replays", body, &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 422, "validation-failed");
    thttp_resp_free(&r);
    /* a selection: the replayed letter says so */
    snprintf(body, sizeof body, "{\"ids\":[%lld]}", zero_letter);
    job = start_job(body, 1);
    if ((done = await_job(job, WAIT_MS)) != NULL) {
        CHECK_STR(jstr(json_array_get(json_object_get(done, "letters"), 0), "result"),
                  "already_replayed");
        json_decref(done);
    }
    console_post("/admin/replays", "{\"ids\":[999999999]}", &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 422, "validation-failed");
    thttp_resp_free(&r);
    console_post("/admin/replays", "{\"ids\":[1],\"group\":\"x\"}", &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 422, "validation-failed");
    thttp_resp_free(&r);

    console_get("/admin/replays", &r);
    CHECK_INT(r.status, 200);
    CHECK(json_array_size(json_object_get(r.json, "items")) >= 2);
    thttp_resp_free(&r);
}

/* ---------------------------------------------------------------- many letters */

/* @n letters straight into the DLQ, with no x-death and no payment behind them; drained. */
static void bulk_letters(const char *prefix, int n)
{
    tmq *mq = tmq_connect(t.amqp_url);
    char body[256], id[64], path[64];
    int drained = 0;
    thttp_resp r;

    if (!CHECK(mq != NULL))
        return;
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "evt-%s-%d", prefix, i);
        snprintf(body, sizeof body,
                 "{\"event_id\":\"%s\",\"payment_id\":\"pay-%s-%d\",\"method\":\"pix\","
                 "\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\"}",
                 id, prefix, i);
        tmq_pub p = {.routing_key = TADM_DLQ, .body = body, .message_id = id};
        if (!tmq_publish_nowait(mq, &p))
            break;
        if (i % 1000 == 999)
            CHECK(tmq_wait_confirms(mq, 10000));
    }
    CHECK(tmq_wait_confirms(mq, 10000));
    tmq_close(mq);
    snprintf(path, sizeof path, "/admin/dlq/drain?max=1000");
    while (drained < n) {
        console_post(path, NULL, &r);
        if (!CHECK_INT(r.status, 200) || jint(r.json, "drained") <= 0) {
            thttp_resp_free(&r);
            break;
        }
        drained += (int)jint(r.json, "drained");
        thttp_resp_free(&r);
    }
    CHECK(drained >= n); /* with the R$ 0 letters that died again after their replay */
}

/* The group of letters with no death and no error (bulk_letters()). */
static void find_bulk_group(void)
{
    thttp_resp r;
    json_t *g;
    size_t i;

    console_get("/admin/dlq/groups", &r);
    json_array_foreach(json_object_get(r.json, "groups"), i, g)
    {
        if (json_is_null(json_object_get(g, "reason")))
            snprintf(bulk_group, sizeof bulk_group, "%s", jstr(g, "key"));
    }
    thttp_resp_free(&r);
    CHECK(bulk_group[0] != '\0');
}

static bool restart_api(const char *rate)
{
    const char *extra[] = {rate, NULL};

    tapi_stop(&api);
    return CHECK(tadm_api_start(&api, &t, "console-api", extra));
}

static void job_survives_a_crash(void)
{
    char body[128];
    long long job, before = tadm_depth(&t, TADM_SETTLEMENT), depth;
    json_t *done;

    /* no worker: what a replay publishes stays in payments.settlement, counted */
    tprog_stop(&worker, 12000);
    if (!restart_api("REPLAY_RATE=20") || !log_in("carol"))
        return;
    bulk_letters("crash", RESTARTS);
    find_bulk_group();
    snprintf(body, sizeof body, "{\"group\":\"%s\"}", bulk_group);
    job = start_job(body, RESTARTS);
    tproc_sleep_ms(1000); /* about 20 replayed */
    tproc_signal(api.proc, SIGKILL);
    tproc_wait_exit(api.proc, 5000);
    tproc_free(api.proc);
    api.proc = NULL;
    if (!CHECK(tadm_api_start(&api, &t, "console-api-2", NULL)) || !log_in("carol"))
        return;
    if ((done = await_job(job, WAIT_MS)) == NULL)
        return;
    CHECK_INT(jint(json_object_get(done, "job"), "replayed"), RESTARTS);
    json_decref(done);
    /* each letter published once; the one in flight at the kill may be published twice */
    depth = tadm_depth(&t, TADM_SETTLEMENT) - before;
    tcheck_context("published %lld for %d letters", depth, RESTARTS);
    CHECK(depth >= RESTARTS && depth <= RESTARTS + 1);
    tcheck_context_clear();
}

static void a_group_of_ten_thousand(void)
{
    char body[128];
    long long job, before, t0;
    json_t *done;

    if (!restart_api("REPLAY_RATE=10000") || !log_in("dave"))
        return;
    bulk_letters("bulk", BULK);
    bulk_group[0] = '\0';
    find_bulk_group(); /* the crash test's letters are replayed: only these are left */
    before = tadm_depth(&t, TADM_SETTLEMENT);
    snprintf(body, sizeof body, "{\"group\":\"%s\"}", bulk_group);
    t0 = tproc_now_ms();
    job = start_job(body, BULK);
    if ((done = await_job(job, 240000)) == NULL)
        return;
    printf("# %d letters replayed in %.1f s\n", BULK, (tproc_now_ms() - t0) / 1000.0);
    CHECK_INT(jint(json_object_get(done, "job"), "replayed"), BULK);
    CHECK_INT(jint(json_object_get(done, "job"), "failed"), 0);
    json_decref(done);
    CHECK_INT(tadm_wait_depth(&t, TADM_SETTLEMENT, before + BULK, WAIT_MS), before + BULK);
}

/* ---------------------------------------------------------------- overview, logout */

static void overview(void)
{
    thttp_resp r;
    json_t *q;
    size_t i;
    bool settlement = false, dlq = false;

    console_get("/admin/overview", &r);
    CHECK_INT(r.status, 200);
    CHECK(json_is_integer(json_object_get(json_object_get(r.json, "outbox"), "pending")));
    CHECK(jint(json_object_get(r.json, "dlq"), "stored") >= 5);
    json_array_foreach(json_object_get(r.json, "queues"), i, q)
    {
        settlement |= strcmp(jstr(q, "name"), TADM_SETTLEMENT) == 0;
        dlq |= strcmp(jstr(q, "name"), TADM_DLQ) == 0;
    }
    CHECK(settlement && dlq);
    thttp_resp_free(&r);
}

static void logout(void)
{
    thttp_resp r;

    call("DELETE", "/admin/session", true, true, NULL, NULL, &r);
    CHECK_INT(r.status, 204);
    CHECK_CONTAINS(thttp_header(&r, "Set-Cookie"), "Max-Age=0");
    thttp_resp_free(&r);
    console_get("/admin/session", &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 401, "unauthorized");
    thttp_resp_free(&r);
    console_get("/admin/overview", &r);
    tapi_check_problem_at(__FILE__, __LINE__, &r, 401, "unauthorized");
    thttp_resp_free(&r);
}

static void tests(void)
{
    TRUN(ui_files);
    TRUN(refused_without_a_session);
    TRUN(cookie_and_csrf);
    TRUN(make_letters);
    TRUN(search);
    TRUN(replay_a_group);
    TRUN(overview);
    TRUN(job_survives_a_crash);
    TRUN(a_group_of_ten_thousand);
    TRUN(logout);
}

int main(void)
{
    static const char *const worker_env[] = {TADM_BANK_237_DOWN, NULL};

    return tadm_main("console_api", &t, &relay, &worker, &api, worker_env, tests);
}
