/* shared/http/http.c - one request state per request, created on the first call */
#include "shared/http/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "shared/lib/log.h"
#include "shared/lib/token.h"

struct http_server {
    struct MHD_Daemon *daemon;
    http_options opt;
    unsigned port;
    atomic_int inflight;
};

struct http_request {
    struct MHD_Connection *conn; /* borrowed from MHD */
    const char *method;          /* borrowed from MHD */
    const char *path;            /* borrowed from MHD */
    char *body;                  /* owned, NUL-terminated */
    size_t len;
    bool too_large;
    int status;
    struct timespec started;
    unsigned suspends; /* how often a handler suspended it */
    void *state;       /* the handler's, see http_request_set_state() */
    void (*state_free)(void *);
    char id[65];
    char principal[65]; /* http_request_set_principal() */
};

static bool request_id_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

static http_request *request_new(struct MHD_Connection *conn, const char *method, const char *url)
{
    http_request *r = calloc(1, sizeof *r);
    const char *given;

    if (r == NULL)
        return NULL;
    r->conn = conn;
    r->method = method;
    r->path = url;
    clock_gettime(CLOCK_MONOTONIC, &r->started);
    given = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    if (given != NULL && request_id_valid(given))
        snprintf(r->id, sizeof r->id, "%s", given);
    else
        token_unique_hex(r->id, 8);
    return r;
}

static void request_append(http_request *r, const char *data, size_t n)
{
    char *nb;

    if (r->too_large)
        return; /* keep reading, keep nothing: the answer is 413 */
    if (r->len + n > HTTP_BODY_MAX) {
        r->too_large = true;
        free(r->body);
        r->body = NULL;
        r->len = 0;
        return;
    }
    nb = realloc(r->body, r->len + n + 1);
    if (nb == NULL) {
        r->too_large = true; /* treated like an oversized body, never a crash */
        return;
    }
    memcpy(nb + r->len, data, n);
    r->len += n;
    nb[r->len] = '\0';
    r->body = nb;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
    http_server *s = cls;
    http_request *r = *req_cls;

    (void)version;
    if (r == NULL) { /* first call: headers only */
        r = request_new(conn, method, url);
        if (r == NULL)
            return MHD_NO;
        *req_cls = r;
        atomic_fetch_add(&s->inflight, 1);
        if (s->opt.early != NULL)
            (void)s->opt.early(s->opt.app, r);
        return MHD_YES;
    }
    if (*upload_size > 0) { /* body chunks */
        if (r->status == 0)
            request_append(r, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->status != 0)
        return MHD_YES; /* answered early */
    unsigned suspends = r->suspends;
    s->opt.handler(s->opt.app, r);
    /* compare counts, not a flag: the resume may already have happened on another thread */
    if (r->status == 0 && r->suspends == suspends) {
        log_error("http_no_answer", "request_id=%s path=%s", r->id, r->path);
        http_reply(r, 500, "application/json", "{}", 2, NULL);
    }
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode code)
{
    http_server *s = cls;
    http_request *r = *req_cls;

    (void)conn;
    if (r == NULL)
        return;
    if (code != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->status == 0)
        log_info("http_aborted", "request_id=%s path=%s code=%d", r->id, r->path, (int)code);
    if (r->state_free != NULL)
        r->state_free(r->state);
    free(r->body);
    free(r);
    *req_cls = NULL;
    atomic_fetch_sub(&s->inflight, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[256];
    size_t n;

    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    n = strcspn(msg, "\n\"");
    msg[n] = '\0';
    log_debug("http_server", "message=\"%s\"", msg);
}

gw_err http_server_start(const http_options *opt, http_server **out)
{
    http_server *s = calloc(1, sizeof *s);
    struct sockaddr_in sa = {0};
    const union MHD_DaemonInfo *info;

    if (s == NULL)
        return GW_ERR_NOMEM;
    s->opt = *opt;
    atomic_init(&s->inflight, 0);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(opt->listen.port);
    if (inet_pton(AF_INET, opt->listen.host, &sa.sin_addr) != 1) {
        /* config_parse_listen() accepts only what inet_pton() does: a caller's mistake */
        log_error("http_listen_failed", "host=%s port=%u error=\"not an IPv4 address\"",
                  opt->listen.host, opt->listen.port);
        free(s);
        return GW_ERR_INVALID;
    }
    {
        /* the thread pool option only when there is a pool: MHD warns on 0 and 1 */
        struct MHD_OptionItem ops[] = {
            {MHD_OPTION_SOCK_ADDR, 0, &sa},
            {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)opt->connection_limit, NULL},
            {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)opt->timeout_s, NULL},
            {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
            {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, NULL},
            {MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL},
            /* a payments API owes no leniency: HTTP/1.1 needs Host, no blanks in the URL */
            {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},
            {MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)opt->per_ip_limit, NULL},
            {opt->threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
             (intptr_t)opt->threads, NULL},
            {MHD_OPTION_END, 0, NULL},
        };
        /* poll(), not epoll: libmicrohttpd's epoll loop stalls after a wait that returned
         * exactly 128 events (decision 28), and costs two epoll_ctl() per suspended request */
        s->daemon =
            MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                                 MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME,
                             0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
    }
    if (s->daemon == NULL) {
        log_error("http_listen_failed", "host=%s port=%u", opt->listen.host,
                  (unsigned)opt->listen.port);
        free(s);
        return GW_ERR_INVALID;
    }
    info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : opt->listen.port;
    log_info("listening", "host=%s port=%u threads=%u", opt->listen.host, s->port, opt->threads);
    *out = s;
    return GW_OK;
}

unsigned http_server_port(const http_server *s)
{
    return s->port;
}

void http_server_stop(http_server *s, int grace_ms)
{
    if (s == NULL)
        return;
    MHD_quiesce_daemon(s->daemon); /* no new connections; requests in flight go on */
    for (int waited = 0; atomic_load(&s->inflight) > 0 && waited < grace_ms; waited += 10)
        usleep(10 * 1000);
    MHD_stop_daemon(s->daemon);
    free(s);
}

const char *http_request_method(const http_request *r)
{
    return r->method;
}

const char *http_request_path(const http_request *r)
{
    return r->path;
}

const char *http_request_header(const http_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_request_query(const http_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_request_id(const http_request *r)
{
    return r->id;
}

void http_request_set_principal(http_request *r, const char *name)
{
    snprintf(r->principal, sizeof r->principal, "%s", name);
}

const char *http_request_principal(const http_request *r)
{
    return r->principal;
}

const char *http_request_body(const http_request *r, size_t *len)
{
    *len = r->len;
    return r->body ? r->body : "";
}

bool http_request_body_too_large(const http_request *r)
{
    return r->too_large;
}

double http_request_age(const http_request *r)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - r->started.tv_sec) +
           (double)(now.tv_nsec - r->started.tv_nsec) / 1e9;
}

int http_request_status(const http_request *r)
{
    return r->status;
}

void http_request_set_state(http_request *r, void *state, void (*free_fn)(void *))
{
    r->state = state;
    r->state_free = free_fn;
}

void *http_request_state(const http_request *r)
{
    return r->state;
}

void http_request_suspend(http_request *r)
{
    r->suspends++;
    MHD_suspend_connection(r->conn);
}

void http_request_resume(http_request *r)
{
    MHD_resume_connection(r->conn);
}

/* The headers of every answer, then @headers (name, value pairs); the name that failed, or NULL. */
static const char *add_headers(struct MHD_Response *resp, const char *content_type,
                               const char *request_id, const char *const *headers)
{
    if (MHD_add_response_header(resp, "Content-Type", content_type) != MHD_YES)
        return "Content-Type";
    if (MHD_add_response_header(resp, "X-Request-Id", request_id) != MHD_YES)
        return "X-Request-Id";
    if (MHD_add_response_header(resp, "Cache-Control", "no-store") != MHD_YES)
        return "Cache-Control";
    /* no answer of ours is to be read as another type than it says (the console shows them) */
    if (MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff") != MHD_YES)
        return "X-Content-Type-Options";
    for (const char *const *h = headers; h != NULL && h[0] != NULL; h += 2)
        if (MHD_add_response_header(resp, h[0], h[1]) != MHD_YES)
            return h[0];
    return NULL;
}

void http_reply(http_request *r, int status, const char *content_type, const char *body, size_t len,
                const char *const *headers)
{
    struct MHD_Response *resp;
    const char *failed;

    if (r->status != 0) {
        log_error("http_double_answer", "request_id=%s status=%d", r->id, status);
        return;
    }
    r->status = status;
    resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (resp == NULL)
        return; /* MHD closes the connection; the client sees no 2xx */
    if ((failed = add_headers(resp, content_type, r->id, headers)) != NULL) {
        /* an answer without one of its headers (Location, Idempotent-Replayed...) would be
         * wrong: a 500 without the extra headers instead, or no answer at all */
        static const char problem[] = "{\"title\":\"response header failed\",\"status\":500}";

        log_error("http_header_failed", "request_id=%s status=%d header=%s", r->id, status, failed);
        MHD_destroy_response(resp);
        r->status = status = 500;
        resp = MHD_create_response_from_buffer(sizeof problem - 1, (void *)problem,
                                               MHD_RESPMEM_PERSISTENT);
        if (resp == NULL || add_headers(resp, "application/problem+json", r->id, NULL) != NULL) {
            if (resp != NULL)
                MHD_destroy_response(resp);
            return; /* MHD closes the connection; the client sees no 2xx */
        }
    }
    if (MHD_queue_response(r->conn, (unsigned)status, resp) != MHD_YES)
        log_warn("http_queue_failed", "request_id=%s status=%d", r->id, status);
    MHD_destroy_response(resp);
}

static void reply_json_as(http_request *r, int status, const char *ctype, json_t *body,
                          const char *const *headers)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);

    json_decref(body);
    if (text == NULL) {
        static const char oom[] = "{\"title\":\"out of memory\",\"status\":500}";
        http_reply(r, 500, "application/problem+json", oom, sizeof oom - 1, NULL);
        return;
    }
    http_reply(r, status, ctype, text, strlen(text), headers);
    free(text);
}

void http_reply_json(http_request *r, int status, json_t *body, const char *const *headers)
{
    reply_json_as(r, status, "application/json", body, headers);
}

void http_reply_problem_json(http_request *r, int status, json_t *problem,
                             const char *const *headers)
{
    reply_json_as(r, status, "application/problem+json", problem, headers);
}
