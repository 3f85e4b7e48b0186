/* api/console/login.h - /admin/session over HTTP: log in with the admin token, resume, log out
 * (docs/console.md "Logging in") */
#ifndef API_CONSOLE_LOGIN_H
#define API_CONSOLE_LOGIN_H

#include <stdbool.h>

#include "api/api_metrics.h"
#include "api/console/session.h"
#include "shared/http/http.h"

/* POST /admin/session {"token", "operator"}: 201 and the session's cookie, or 401. */
void login_open(sessions *s, const char *admin_token, api_metrics *m, http_request *r);

/* GET /admin/session: the session's operator, CSRF token and expiry (routes checked it). */
void login_show(sessions *s, api_metrics *m, http_request *r);

/* DELETE /admin/session: forget the session and clear the cookie. */
void login_close(sessions *s, api_metrics *m, http_request *r);

/*
 * login_check - may @r use the console session of its cookie: true with its view into @view
 * (may be NULL). A request that changes something must carry the session's X-CSRF-Token;
 * *@csrf_missing says when that alone was wrong.
 */
bool login_check(sessions *s, http_request *r, session_view *view, bool *csrf_missing);

#endif
