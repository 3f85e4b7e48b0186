/* api/console/login.c - the admin token exchanged once for an HttpOnly, SameSite=Strict cookie */
#include "api/console/login.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/problem.h"
#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"
#include "shared/lib/token.h"

#define DEFAULT_OPERATOR "console"

/* Behind a TLS proxy the cookie must say Secure; we serve plain HTTP on loopback ourselves. */
static bool over_tls(http_request *r)
{
    const char *p = http_request_header(r, "X-Forwarded-Proto");

    return p != NULL && strcmp(p, "https") == 0;
}

static json_t *view_json(const session_view *v)
{
    char at[32];
    struct tm tm;

    gmtime_r(&v->expires_at, &tm);
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_pack("{s:s,s:s,s:s}", "operator", v->operator, "csrf", v->csrf, "expires_at", at);
}

static void reply_unauthorized(api_metrics *m, http_request *r, const char *detail)
{
    problem_reply(r, m, 401, "unauthorized", "Unauthorized", detail, NULL, NULL);
}

void login_open(sessions *s, const char *admin_token, api_metrics *m, http_request *r)
{
    size_t len = 0;
    const char *buf = http_request_body(r, &len), *token, *operator;
    char why[160], id[SESSION_ID_LEN], cookie[160];
    const char *headers[] = {"Set-Cookie", cookie, NULL};
    session_view view;
    json_t *body = NULL;

    if (json_strict_parse(buf, len, JSON_STRICT_MAX_DEPTH, &body, why, sizeof why) != GW_OK) {
        problem_reply(r, m, 400, "malformed-json", "Malformed JSON", why, NULL, NULL);
        return;
    }
    token = json_string_value(json_object_get(body, "token"));
    operator= json_string_value(json_object_get(body, "operator"));
    if (operator== NULL || operator[0] == '\0')
        operator= DEFAULT_OPERATOR;
    if (token == NULL || !token_equal(token, strlen(token), admin_token)) {
        log_warn("console_login_refused", "request_id=%s", http_request_id(r));
        reply_unauthorized(m, r, "the admin token is required to log in");
    } else if (!session_operator_valid(operator)) {
        problem_reply_invalid(r, m, "/operator", "operator must be 1..64 of A-Z a-z 0-9 . _ @ -");
    } else if (sessions_open(s, operator, id, &view) != GW_OK) {
        problem_reply(r, m, 503, "too-many-sessions", "Service Unavailable",
                      "too many console sessions are open; log out of one", NULL, NULL);
    } else {
        /* no Max-Age: the browser forgets it when it closes; the server's expiry rules anyway */
        snprintf(cookie, sizeof cookie,
                 SESSION_COOKIE "=%s; Path=/admin; HttpOnly; SameSite=Strict%s", id,
                 over_tls(r) ? "; Secure" : "");
        log_info("console_login", "request_id=%s operator=%s", http_request_id(r), view.operator);
        http_reply_json(r, 201, view_json(&view), headers);
    }
    json_decref(body);
}

void login_show(sessions *s, api_metrics *m, http_request *r)
{
    session_view view;

    if (!sessions_find(s, http_request_header(r, "Cookie"), &view))
        reply_unauthorized(m, r, "no console session: log in");
    else
        http_reply_json(r, 200, view_json(&view), NULL);
}

void login_close(sessions *s, api_metrics *m, http_request *r)
{
    static const char *const clear[] = {
        "Set-Cookie", SESSION_COOKIE "=; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=0", NULL};
    session_view view;

    (void)m;
    if (sessions_find(s, http_request_header(r, "Cookie"), &view))
        log_info("console_logout", "request_id=%s operator=%s", http_request_id(r), view.operator);
    sessions_close(s, http_request_header(r, "Cookie"));
    http_reply(r, 204, "text/plain", "", 0, clear);
}

bool login_check(sessions *s, http_request *r, session_view *view, bool *csrf_missing)
{
    const char *method = http_request_method(r), *given;
    session_view v;

    *csrf_missing = false;
    if (!sessions_find(s, http_request_header(r, "Cookie"), &v))
        return false;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        given = http_request_header(r, "X-CSRF-Token");
        if (given == NULL || !token_equal(given, strlen(given), v.csrf)) {
            *csrf_missing = true;
            return false;
        }
    }
    if (view != NULL)
        *view = v;
    return true;
}
