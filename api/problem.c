/* api/problem.c - problem+json bodies */
#include "api/problem.h"

#include <stdio.h>

#include "shared/lib/log.h"

json_t *problem_new(int status, const char *slug, const char *title, const char *detail,
                    const field_errors *errs)
{
    char type[128];
    json_t *p = json_object();

    snprintf(type, sizeof type, PROBLEM_TYPE_BASE "%s", slug);
    json_object_set_new(p, "type", json_string(type)); /* steals */
    json_object_set_new(p, "title", json_string(title));
    json_object_set_new(p, "status", json_integer(status));
    json_object_set_new(p, "detail", json_string(detail));
    if (errs != NULL) {
        json_t *list = json_array();
        for (int i = 0; i < errs->n; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "pointer", json_string(errs->e[i].pointer));
            json_object_set_new(e, "detail", json_string(errs->e[i].detail));
            json_array_append_new(list, e);
        }
        json_object_set_new(p, "errors", list);
    }
    return p;
}

void problem_reply(http_request *r, api_metrics *m, int status, const char *slug, const char *title,
                   const char *detail, const field_errors *errs, const char *const *headers)
{
    static const char *const www_auth[] = {"WWW-Authenticate", "Bearer", NULL};

    if (m != NULL)
        api_metrics_rejected(m, status);
    if (status == 401 && headers == NULL)
        headers = www_auth;
    log_info("request_rejected", "request_id=%s method=%s path=%s status=%d problem=%s",
             http_request_id(r), http_request_method(r), http_request_path(r), status, slug);
    http_reply_problem_json(r, status, problem_new(status, slug, title, detail, errs), headers);
}

void problem_reply_invalid(http_request *r, api_metrics *m, const char *pointer, const char *detail)
{
    field_errors errs = {.n = 1};

    snprintf(errs.e[0].pointer, sizeof errs.e[0].pointer, "%s", pointer);
    snprintf(errs.e[0].detail, sizeof errs.e[0].detail, "%s", detail);
    problem_reply(r, m, 422, "validation-failed", "Validation Failed", detail, &errs, NULL);
}

void problem_reply_unavailable(http_request *r, api_metrics *m, const char *detail)
{
    static const char *const retry_1[] = {"Retry-After", "1", NULL};

    problem_reply(r, m, 503, "service-unavailable", "Service Unavailable", detail, NULL, retry_1);
}
