/* api/problem.h - RFC 9457 problem details, the body of every error answer */
#ifndef API_PROBLEM_H
#define API_PROBLEM_H

#include <jansson.h>

#include "api/api_metrics.h"
#include "shared/http/http.h"
#include "shared/payment.h"

#define PROBLEM_TYPE_BASE "https://paygw.example/problems/"

/*
 * problem_new - {"type": BASE+@slug, "title", "status", "detail"} plus, when
 * @errs is not NULL, "errors": [{"pointer", "detail"}...]. New reference
 * owned by the caller. @slug, @title and @detail are copied.
 */
json_t *problem_new(int status, const char *slug, const char *title, const char *detail,
                    const field_errors *errs);

/*
 * problem_reply - answer @r with a problem, count it in @m's rejected-by-status
 * series, and add "WWW-Authenticate: Bearer" to a 401. @headers as http_reply().
 */
void problem_reply(http_request *r, api_metrics *m, int status, const char *slug, const char *title,
                   const char *detail, const field_errors *errs, const char *const *headers);

/* problem_reply_invalid - 422 validation-failed naming one field: @pointer and @detail. */
void problem_reply_invalid(http_request *r, api_metrics *m, const char *pointer,
                           const char *detail);

/* problem_reply_unavailable - 503 service-unavailable with @detail and Retry-After: 1. */
void problem_reply_unavailable(http_request *r, api_metrics *m, const char *detail);

#endif
