/* api/routes.c - a small table: prefix, token, then method and path */
#include "api/routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/admin/reconciler.h"
#include "api/console/assets.h"
#include "api/console/login.h"
#include "api/console/overview.h"
#include "api/problem.h"
#include "shared/lib/log.h"
#include "shared/lib/names.h"
#include "shared/lib/token.h"

#define PAYMENTS_PATH "/v1/payments"
#define UI_PATH       "/admin/ui"
#define REPLAYS_PATH  "/admin/replays"
#define REPLAYED_BY   "admin-token"

/* "/admin/dlq/{id}" or "/admin/dlq/{id}/replay": the id into @id (size 24) */
static route dlq_route(const char *rest, char *id)
{
    const char *slash = strchr(rest, '/');
    size_t len = slash ? (size_t)(slash - rest) : strlen(rest);

    if (len == 0 || len >= 24)
        return ROUTE_ADMIN_OTHER;
    memcpy(id, rest, len);
    id[len] = '\0';
    if (slash == NULL)
        return ROUTE_DLQ_ONE;
    return strcmp(slash, "/replay") == 0 ? ROUTE_DLQ_REPLAY : ROUTE_ADMIN_OTHER;
}

/* The routes whose path is fixed, by route. */
static const char *const fixed_paths[] = {
    [ROUTE_HEALTHZ] = "/healthz",
    [ROUTE_READYZ] = "/readyz",
    [ROUTE_METRICS] = "/metrics",
    [ROUTE_PAYMENTS] = PAYMENTS_PATH,
    [ROUTE_DLQ_DRAIN] = "/admin/dlq/drain",
    [ROUTE_DLQ_LIST] = "/admin/dlq",
    [ROUTE_RECONCILE] = "/admin/reconciliation",
    [ROUTE_DLQ_GROUPS] = "/admin/dlq/groups",
    [ROUTE_OVERVIEW] = "/admin/overview",
    [ROUTE_SESSION] = "/admin/session",
    [ROUTE_REPLAYS] = REPLAYS_PATH,
    [ROUTE_UI_ROOT] = UI_PATH,
};

/* "/admin/replays/{id}": the id into @id (size 24) */
static route job_route(const char *rest, char *id)
{
    size_t len = strlen(rest);

    if (len == 0 || len >= 24 || strchr(rest, '/') != NULL)
        return ROUTE_ADMIN_OTHER;
    memcpy(id, rest, len + 1);
    return ROUTE_REPLAY_JOB;
}

route routes_match(const char *path, char *id)
{
    int fixed = NAMES_FIND(fixed_paths, path);

    if (fixed >= 0)
        return (route)fixed;
    if (strncmp(path, PAYMENTS_PATH "/", sizeof PAYMENTS_PATH) == 0 &&
        path[sizeof PAYMENTS_PATH] != '\0' && strchr(path + sizeof PAYMENTS_PATH, '/') == NULL)
        return ROUTE_PAYMENT;
    if (strncmp(path, "/admin/dlq/", 11) == 0)
        return dlq_route(path + 11, id);
    if (strncmp(path, UI_PATH "/", sizeof UI_PATH) == 0)
        return ROUTE_UI;
    if (strncmp(path, REPLAYS_PATH "/", sizeof REPLAYS_PATH) == 0)
        return job_route(path + sizeof REPLAYS_PATH, id);
    if (strncmp(path, "/admin/", 7) == 0 || strcmp(path, "/admin") == 0)
        return ROUTE_ADMIN_OTHER;
    if (strncmp(path, "/v1/", 4) == 0 || strcmp(path, "/v1") == 0)
        return ROUTE_V1_OTHER;
    return ROUTE_NONE;
}

/* The methods each route answers, for 405 and its Allow header (GET answers HEAD too). */
static const char *route_methods(route rt)
{
    switch (rt) {
    case ROUTE_PAYMENTS:
    case ROUTE_DLQ_DRAIN:
    case ROUTE_DLQ_REPLAY:
        return "POST";
    case ROUTE_DLQ_LIST:
    case ROUTE_DLQ_ONE:
    case ROUTE_DLQ_GROUPS:
    case ROUTE_RECONCILE:
    case ROUTE_OVERVIEW:
    case ROUTE_REPLAY_JOB:
    case ROUTE_UI:
    case ROUTE_UI_ROOT:
    case ROUTE_HEALTHZ:
    case ROUTE_READYZ:
    case ROUTE_METRICS:
    case ROUTE_PAYMENT:
        return "GET";
    case ROUTE_REPLAYS:
        return "GET, POST";
    case ROUTE_SESSION:
        return "GET, POST, DELETE";
    default:
        return NULL;
    }
}

static bool method_allowed(const char *allow, const char *method)
{
    size_t n = strlen(method);

    if (strcmp(method, "HEAD") == 0)
        method = "GET", n = 3;
    for (const char *p = allow; (p = strstr(p, method)) != NULL; p += n)
        if ((p == allow || p[-1] == ' ') && (p[n] == '\0' || p[n] == ','))
            return true;
    return false;
}

/* Which token opens @rt: NULL when none is needed. */
static const char *route_token(const api_app *app, route rt)
{
    switch (rt) {
    case ROUTE_PAYMENTS:
    case ROUTE_PAYMENT:
    case ROUTE_V1_OTHER:
        return app->cfg->api_token;
    case ROUTE_DLQ_DRAIN:
    case ROUTE_DLQ_LIST:
    case ROUTE_DLQ_ONE:
    case ROUTE_DLQ_REPLAY:
    case ROUTE_DLQ_GROUPS:
    case ROUTE_RECONCILE:
    case ROUTE_OVERVIEW:
    case ROUTE_SESSION:
    case ROUTE_REPLAYS:
    case ROUTE_REPLAY_JOB:
    case ROUTE_ADMIN_OTHER:
        return app->cfg->admin_token;
    default: /* the console's files hold no data: the page logs in itself */
        return NULL;
    }
}

/* A request whose JSON body is read: its type and size are checked before the body comes. */
static bool takes_json(route rt, const char *method)
{
    return strcmp(method, "POST") == 0 &&
           (rt == ROUTE_PAYMENTS || rt == ROUTE_SESSION || rt == ROUTE_REPLAYS);
}

static bool bearer_ok(http_request *r, const char *expected)
{
    const char *h = http_request_header(r, "Authorization");

    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    return token_equal(h, strlen(h), expected);
}

static bool is_json_type(const char *ct)
{
    static const char json[] = "application/json";

    if (ct == NULL || strncasecmp(ct, json, sizeof json - 1) != 0)
        return false;
    ct += sizeof json - 1;
    return *ct == '\0' || *ct == ';' || *ct == ' ';
}

/*
 * May @r call @rt, whose token is @token: the bearer token, or for /admin a console session
 * (with its CSRF token when it changes something; logging in needs neither). False when it
 * was answered (401, 403).
 */
static bool authorized(api_app *app, http_request *r, route rt, const char *token)
{
    api_metrics *m = app->payments.metrics;
    bool csrf_missing = false;

    if (token == NULL || bearer_ok(r, token))
        return true;
    if (token == app->cfg->admin_token) {
        if (rt == ROUTE_SESSION && strcmp(http_request_method(r), "POST") == 0)
            return true; /* the login itself: the token comes in its body */
        session_view v;

        if (login_check(app->sessions, r, &v, &csrf_missing)) {
            /* the operator as authorized: request_actor() must not look the session up again,
             * it may have ended in between */
            http_request_set_principal(r, v.operator);
            return true;
        }
        if (csrf_missing) {
            problem_reply(r, m, 403, "csrf-token-required", "Forbidden",
                          "a console request that changes something needs the session's "
                          "X-CSRF-Token",
                          NULL, NULL);
            return false;
        }
    }
    problem_reply(r, m, 401, "unauthorized", "Unauthorized",
                  "a valid Bearer token for this path is required", NULL, NULL);
    return false;
}

bool routes_early(void *arg, http_request *r)
{
    api_app *app = arg;
    api_metrics *m = app->payments.metrics;
    char id[24];
    route rt = routes_match(http_request_path(r), id);
    const char *methods = route_methods(rt);
    const char *cl;

    if (!authorized(app, r, rt, route_token(app, rt)))
        return true;
    if (methods == NULL) {
        problem_reply(r, m, 404, "not-found", "Not Found", "no such resource", NULL, NULL);
        return true;
    }
    if (!method_allowed(methods, http_request_method(r))) {
        const char *allow[] = {"Allow", methods, NULL};
        problem_reply(r, m, 405, "method-not-allowed", "Method Not Allowed",
                      "this resource does not support that method", NULL, allow);
        return true;
    }
    if (!takes_json(rt, http_request_method(r)))
        return false;
    if (!is_json_type(http_request_header(r, "Content-Type"))) {
        problem_reply(r, m, 415, "unsupported-media-type", "Unsupported Media Type",
                      "send the body as Content-Type: application/json", NULL, NULL);
        return true;
    }
    cl = http_request_header(r, "Content-Length");
    if (cl != NULL && strtoull(cl, NULL, 10) > HTTP_BODY_MAX) {
        problem_reply(r, m, 413, "payload-too-large", "Payload Too Large",
                      "the body is over 64 KiB", NULL, NULL);
        return true;
    }
    return false;
}

static void reply_health(http_request *r, int status, const char *state)
{
    static const char *const retry[] = {"Retry-After", "1", NULL};

    if (status == 200) {
        http_reply_json(r, status, json_pack("{s:s}", "status", state), NULL);
        return;
    }
    http_reply_problem_json(
        r, status,
        problem_new(status, "not-ready", "Not Ready", "the database is unavailable", NULL), retry);
}

static void handle_readyz(api_app *app, http_request *r)
{
    db_conn *db = NULL;
    bool ok = false;

    if (db_pool_acquire(app->payments.pool, 1000, &db) == GW_OK) {
        ok = db_healthy(db);
        db_pool_release(app->payments.pool, db);
    }
    reply_health(r, ok ? 200 : 503, ok ? "ready" : "not_ready");
}

static void handle_metrics(api_app *app, http_request *r)
{
    size_t len = 0;
    char *text = metrics_render(app->payments.metrics->registry, &len);

    if (text == NULL) {
        http_reply(r, 500, "text/plain", "out of memory\n", 14, NULL);
        return;
    }
    http_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, NULL);
    free(text);
}

/*
 * Who the request acts as, for the replay records: the console session's operator, as
 * authorized() found it; with the bearer token, X-Actor when it is a valid name, else the
 * credential.
 */
static const char *request_actor(http_request *r)
{
    const char *actor = http_request_header(r, "X-Actor");

    if (http_request_principal(r)[0] != '\0') /* a console session's, set by authorized() */
        return http_request_principal(r);
    return actor != NULL && payment_id_valid(actor, strlen(actor)) ? actor : REPLAYED_BY;
}

static void handle_session(api_app *app, http_request *r)
{
    const char *method = http_request_method(r);
    api_metrics *m = app->payments.metrics;

    if (strcmp(method, "POST") == 0)
        login_open(app->sessions, app->cfg->admin_token, m, r);
    else if (strcmp(method, "DELETE") == 0)
        login_close(app->sessions, m, r);
    else
        login_show(app->sessions, m, r);
}

static void handle_replays(api_app *app, http_request *r)
{
    if (strcmp(http_request_method(r), "POST") != 0)
        replay_jobs_list(app->jobs, r);
    else
        replay_jobs_create(app->jobs, r, request_actor(r));
}

void routes_handle(void *arg, http_request *r)
{
    static const char *const to_slash[] = {"Location", UI_PATH "/", NULL};
    api_app *app = arg;
    const char *path = http_request_path(r);
    char id[24];

    switch (routes_match(path, id)) {
    case ROUTE_HEALTHZ:
        reply_health(r, 200, "ok");
        return;
    case ROUTE_READYZ:
        handle_readyz(app, r);
        return;
    case ROUTE_METRICS:
        handle_metrics(app, r);
        return;
    case ROUTE_PAYMENTS:
        payments_accept(&app->payments, r);
        return;
    case ROUTE_PAYMENT:
        payments_get(&app->payments, r, path + sizeof PAYMENTS_PATH);
        return;
    case ROUTE_DLQ_DRAIN:
        dlq_drain(app->dlq, r);
        return;
    case ROUTE_DLQ_LIST:
        dlq_list(app->dlq, r);
        return;
    case ROUTE_DLQ_GROUPS:
        dlq_groups(app->dlq, r);
        return;
    case ROUTE_DLQ_ONE:
        dlq_get(app->dlq, r, id);
        return;
    case ROUTE_DLQ_REPLAY:
        dlq_replay(app->dlq, r, id, request_actor(r));
        return;
    case ROUTE_RECONCILE:
        reconciler_request(app->reconciler, r);
        return;
    case ROUTE_OVERVIEW:
        overview_reply(app->payments.pool, app->dlq, app->payments.metrics, r);
        return;
    case ROUTE_SESSION:
        handle_session(app, r);
        return;
    case ROUTE_REPLAYS:
        handle_replays(app, r);
        return;
    case ROUTE_REPLAY_JOB:
        replay_jobs_get(app->jobs, r, id);
        return;
    case ROUTE_UI:
        console_serve(r, path + sizeof UI_PATH);
        return;
    case ROUTE_UI_ROOT:
        http_reply(r, 308, "text/plain", "", 0, to_slash);
        return;
    default: /* routes_early() answered every other case */
        problem_reply(r, app->payments.metrics, 404, "not-found", "Not Found", "no such resource",
                      NULL, NULL);
        return;
    }
}
