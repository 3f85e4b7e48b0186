/* shared/http/http.h - libmicrohttpd glue: request state, bounded bodies, JSON answers */
#ifndef SHARED_HTTP_HTTP_H
#define SHARED_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "shared/config.h"
#include "shared/lib/err.h"

#define HTTP_BODY_MAX (64 * 1024)

typedef struct http_server http_server;
typedef struct http_request http_request;

/*
 * The application's two hooks. Both run on an HTTP thread and may block.
 * http_early_fn sees the headers before the body: it may answer at once (401,
 * 413, 415 ...) and returns whether it did. http_handler_fn runs when the body
 * is complete and must answer.
 */
typedef bool (*http_early_fn)(void *app, http_request *r);
typedef void (*http_handler_fn)(void *app, http_request *r);

typedef struct http_options {
    listen_addr listen;
    unsigned threads;          /* worker threads of the daemon */
    unsigned connection_limit; /* concurrent connections */
    unsigned per_ip_limit;     /* concurrent connections from one address, 0: no limit */
    unsigned timeout_s;        /* idle time before a connection is closed */
    http_early_fn early;       /* may be NULL */
    http_handler_fn handler;
    void *app; /* borrowed */
} http_options;

/*
 * http_server_start - listen and serve on its own threads. On GW_OK, *@out is
 * owned by the caller (http_server_stop()) and "listening" is logged with the
 * bound port (useful when the port given was 0).
 */
GW_MUSTCHECK gw_err http_server_start(const http_options *opt, http_server **out);

/* http_server_port - the bound port. */
unsigned http_server_port(const http_server *s);

/*
 * http_server_stop - stop accepting, let requests in flight finish for up to
 * @grace_ms, then stop the threads and free @s. Accepts NULL.
 */
void http_server_stop(http_server *s, int grace_ms);

/* Request accessors; every string is borrowed for the request's lifetime. */
const char *http_request_method(const http_request *r);
const char *http_request_path(const http_request *r);
const char *http_request_header(const http_request *r, const char *name); /* NULL: absent */
const char *http_request_query(const http_request *r, const char *name);  /* NULL: absent */
const char *http_request_id(const http_request *r);
const char *http_request_body(const http_request *r, size_t *len);
bool http_request_body_too_large(const http_request *r);
double http_request_age(const http_request *r); /* seconds since the headers arrived */
int http_request_status(const http_request *r); /* status answered, 0 before */

/*
 * http_request_set_principal - who the request was authenticated as, decided
 * once when it was authorized (at most 64 bytes kept); http_request_principal()
 * gives it back later in the same request, "" when none was set.
 */
void http_request_set_principal(http_request *r, const char *name);
const char *http_request_principal(const http_request *r);

/*
 * Asynchronous answers. A handler that hands the work to another thread calls
 * http_request_suspend() and returns without answering; that thread calls
 * http_request_resume() when done, and the handler runs again on an HTTP
 * thread, where it finds its state with http_request_state() and answers.
 * The state (owned, freed with @free_fn when the request ends) survives both.
 */
void http_request_set_state(http_request *r, void *state, void (*free_fn)(void *));
void *http_request_state(const http_request *r);
void http_request_suspend(http_request *r);
void http_request_resume(http_request *r); /* any thread */

/*
 * Answers. Each sends exactly one response; @headers is NULL or a
 * NULL-terminated list of name, value pairs. Bodies are copied.
 */
void http_reply(http_request *r, int status, const char *content_type, const char *body, size_t len,
                const char *const *headers);
/* http_reply_json - steals @body. */
void http_reply_json(http_request *r, int status, json_t *body, const char *const *headers);
/* http_reply_problem_json - steals @problem; Content-Type application/problem+json. */
void http_reply_problem_json(http_request *r, int status, json_t *problem,
                             const char *const *headers);

#endif
