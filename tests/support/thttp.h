/* tests/support/thttp.h - an HTTP client for the tests (libcurl) */
#ifndef TESTS_SUPPORT_THTTP_H
#define TESTS_SUPPORT_THTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <jansson.h>

typedef struct thttp_field {
    char *name;  /* owned */
    char *value; /* owned, trimmed */
} thttp_field;

/* A response; free with thttp_resp_free(). */
typedef struct thttp_resp {
    long status;                 /* 0: no HTTP response at all (see error) */
    CURLcode curl_code;          /* CURLE_OK when the exchange completed */
    char error[CURL_ERROR_SIZE]; /* curl's reason when curl_code != CURLE_OK */
    char *body;                  /* owned, NUL-terminated ("" when empty) */
    size_t len;
    json_t *json;         /* owned: the decoded body when it is JSON, else NULL */
    thttp_field *headers; /* owned, of the final response only */
    size_t nheaders;
} thttp_resp;

/* One request. Unset fields take the defaults in the comments. */
typedef struct thttp_req {
    const char *method; /* "GET" */
    const char *url;
    const char *const *headers; /* NULL-terminated "Name: value" lines; "Name:" removes a default */
    const char *body;           /* may contain NUL bytes; NULL: no body */
    size_t len;
    bool chunked;    /* send the body with Transfer-Encoding: chunked, no Content-Length */
    long timeout_ms; /* 15000 */
} thttp_req;

/* thttp_global_init - curl_global_init(); once, from main() before threads. */
void thttp_global_init(void);
void thttp_global_cleanup(void);

/*
 * thttp_do - send @req on a new easy handle (so threads can call it at once)
 * and fill @out, which the caller frees with thttp_resp_free(). Returns
 * whether an HTTP response arrived (out->status != 0).
 */
bool thttp_do(const thttp_req *req, thttp_resp *out);

/* thttp_request - thttp_do() with the common fields. */
bool thttp_request(const char *method, const char *url, const char *const *headers,
                   const char *body, size_t len, thttp_resp *out);

/* thttp_header - the value of response header @name (case-insensitive), borrowed; NULL if absent.
 */
const char *thttp_header(const thttp_resp *r, const char *name);

/* thttp_json_str - the string member @key of the decoded body, borrowed; NULL if absent. */
const char *thttp_json_str(const thttp_resp *r, const char *key);

void thttp_resp_free(thttp_resp *r);

/*
 * thttp_post_payment - POST @body to @base/v1/payments with
 * "Authorization: Bearer @token" and Content-Type application/json, plus
 * @extra headers (NULL-terminated, may be NULL).
 */
bool thttp_post_payment(const char *base, const char *token, const char *body,
                        const char *const *extra, thttp_resp *out);
/* thttp_post_payment_n - the same with @len bytes of @body (which may hold NUL bytes). */
bool thttp_post_payment_n(const char *base, const char *token, const char *body, size_t len,
                          const char *const *extra, thttp_resp *out);

/* thttp_get - GET @base@path with the Bearer @token (NULL: no Authorization). */
bool thttp_get(const char *base, const char *path, const char *token, thttp_resp *out);

#endif
