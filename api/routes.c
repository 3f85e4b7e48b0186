/* api/routes.c - a small table: prefix, token, then method and path */
#include "api/routes.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/admin/reconcile.h"
#include "api/problem.h"
#include "shared/lib/log.h"
#include "shared/lib/names.h"
#include "shared/lib/token.h"

#define PAYMENTS_PATH "/v1/payments"

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
};

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
    if (strncmp(path, "/admin/", 7) == 0 || strcmp(path, "/admin") == 0)
        return ROUTE_ADMIN_OTHER;
    if (strncmp(path, "/v1/", 4) == 0 || strcmp(path, "/v1") == 0)
        return ROUTE_V1_OTHER;
    return ROUTE_NONE;
}

/* The allowed method of each route, for 405 and its Allow header. */
static const char *route_method(route rt)
{
    switch (rt) {
    case ROUTE_PAYMENTS:
    case ROUTE_DLQ_DRAIN:
    case ROUTE_DLQ_REPLAY:
        return "POST";
    case ROUTE_DLQ_LIST:
    case ROUTE_DLQ_ONE:
    case ROUTE_RECONCILE:
    case ROUTE_HEALTHZ:
    case ROUTE_READYZ:
    case ROUTE_METRICS:
    case ROUTE_PAYMENT:
        return "GET";
    default:
        return NULL;
    }
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
    case ROUTE_RECONCILE:
    case ROUTE_ADMIN_OTHER:
        return app->cfg->admin_token;
    default:
        return NULL;
    }
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

bool routes_early(void *arg, http_request *r)
{
    api_app *app = arg;
    api_metrics *m = app->payments.metrics;
    char id[24];
    route rt = routes_match(http_request_path(r), id);
    const char *token = route_token(app, rt);
    const char *method = route_method(rt);
    const char *cl;

    if (token != NULL && !bearer_ok(r, token)) {
        problem_reply(r, m, 401, "unauthorized", "Unauthorized",
                      "a valid Bearer token for this path is required", NULL, NULL);
        return true;
    }
    if (method == NULL) {
        problem_reply(r, m, 404, "not-found", "Not Found", "no such resource", NULL, NULL);
        return true;
    }
    if (strcmp(http_request_method(r), method) != 0 &&
        !(strcmp(method, "GET") == 0 && strcmp(http_request_method(r), "HEAD") == 0)) {
        const char *allow[] = {"Allow", method, NULL};
        problem_reply(r, m, 405, "method-not-allowed", "Method Not Allowed",
                      "this resource does not support that method", NULL, allow);
        return true;
    }
    if (rt != ROUTE_PAYMENTS)
        return false;
    if (!is_json_type(http_request_header(r, "Content-Type"))) {
        problem_reply(r, m, 415, "unsupported-media-type", "Unsupported Media Type",
                      "send the payment as Content-Type: application/json", NULL, NULL);
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

void routes_handle(void *arg, http_request *r)
{
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
    case ROUTE_DLQ_ONE:
        dlq_get(app->dlq, r, id);
        return;
    case ROUTE_DLQ_REPLAY:
        dlq_replay(app->dlq, r, id);
        return;
    case ROUTE_RECONCILE:
        reconcile_report(app->cfg, app->payments.pool, app->payments.metrics, r);
        return;
    default: /* routes_early() answered every other case */
        problem_reply(r, app->payments.metrics, 404, "not-found", "Not Found", "no such resource",
                      NULL, NULL);
        return;
    }
}
