/* tests/support/thttp.c - one easy handle per request, headers kept for lookups */
#include "tests/support/thttp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TIMEOUT_MS 15000L

void thttp_global_init(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "thttp: curl_global_init failed\n");
        exit(1);
    }
}

void thttp_global_cleanup(void)
{
    curl_global_cleanup();
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    thttp_resp *r = arg;
    size_t len = size * n;
    char *nb = realloc(r->body, r->len + len + 1);

    if (nb == NULL)
        return 0; /* curl reports a write error */
    memcpy(nb + r->len, data, len);
    r->len += len;
    nb[r->len] = '\0';
    r->body = nb;
    return len;
}

static void clear_headers(thttp_resp *r)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    r->headers = NULL;
    r->nheaders = 0;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    thttp_resp *r = arg;
    size_t len = size * n, name_len, vstart, vend;
    const char *colon;
    thttp_field *nh;

    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        clear_headers(r); /* a new status line: keep only the final response's headers */
        return len;
    }
    colon = memchr(data, ':', len);
    if (colon == NULL)
        return len; /* the blank line at the end */
    name_len = (size_t)(colon - data);
    vstart = name_len + 1;
    while (vstart < len && (data[vstart] == ' ' || data[vstart] == '\t'))
        vstart++;
    vend = len;
    while (vend > vstart && (data[vend - 1] == '\r' || data[vend - 1] == '\n' ||
                             data[vend - 1] == ' ' || data[vend - 1] == '\t'))
        vend--;
    nh = realloc(r->headers, (r->nheaders + 1) * sizeof *nh);
    if (nh == NULL)
        return 0;
    r->headers = nh;
    nh[r->nheaders].name = strndup(data, name_len);
    nh[r->nheaders].value = strndup(data + vstart, vend - vstart);
    r->nheaders++;
    return len;
}

/* The chunked upload: hands out req->body in slices of at most @size * @n bytes. */
typedef struct upload {
    const char *p;
    size_t left;
} upload;

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    upload *u = arg;
    size_t len = size * n;

    if (len > 8192)
        len = 8192; /* several chunks, like a streaming client */
    if (len > u->left)
        len = u->left;
    memcpy(buf, u->p, len);
    u->p += len;
    u->left -= len;
    return len;
}

bool thttp_do(const thttp_req *req, thttp_resp *out)
{
    const char *method = req->method ? req->method : "GET";
    struct curl_slist *hl = NULL;
    upload up = {req->body, req->len};
    CURL *c;

    memset(out, 0, sizeof *out);
    c = curl_easy_init();
    if (c == NULL) {
        snprintf(out->error, sizeof out->error, "curl_easy_init failed");
        out->curl_code = CURLE_FAILED_INIT;
        return false;
    }
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                     req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, out->error);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    for (const char *const *h = req->headers; h != NULL && *h != NULL; h++)
        hl = curl_slist_append(hl, *h);
    if (req->body != NULL) {
        if (req->chunked) {
            curl_easy_setopt(c, CURLOPT_POST, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(c, CURLOPT_READDATA, &up);
            hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
        }
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    out->curl_code = curl_easy_perform(c);
    if (out->curl_code == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    } else {
        out->status = 0; /* a partial response is no response */
        if (out->error[0] == '\0')
            snprintf(out->error, sizeof out->error, "%s", curl_easy_strerror(out->curl_code));
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    if (out->body == NULL)
        out->body = strdup("");
    if (out->len > 0)
        out->json = json_loadb(out->body, out->len, 0, NULL);
    return out->status != 0;
}

bool thttp_request(const char *method, const char *url, const char *const *headers,
                   const char *body, size_t len, thttp_resp *out)
{
    thttp_req req = {.method = method, .url = url, .headers = headers, .body = body, .len = len};

    return thttp_do(&req, out);
}

const char *thttp_header(const thttp_resp *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

const char *thttp_json_str(const thttp_resp *r, const char *key)
{
    return json_string_value(json_object_get(r->json, key)); /* both accept NULL */
}

void thttp_resp_free(thttp_resp *r)
{
    clear_headers(r);
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

bool thttp_post_payment(const char *base, const char *token, const char *body,
                        const char *const *extra, thttp_resp *out)
{
    return thttp_post_payment_n(base, token, body, strlen(body), extra, out);
}

bool thttp_post_payment_n(const char *base, const char *token, const char *body, size_t len,
                          const char *const *extra, thttp_resp *out)
{
    const char *headers[16];
    char url[256], auth[256];
    size_t n = 0;

    snprintf(url, sizeof url, "%s/v1/payments", base);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    headers[n++] = auth;
    headers[n++] = "Content-Type: application/json";
    for (const char *const *h = extra; h != NULL && *h != NULL && n < 15; h++) {
        size_t name_len = strcspn(*h, ":"), i;

        /* a line for a header already listed replaces it ("Content-Type:" removes it) */
        for (i = 0; i < n; i++)
            if (strncasecmp(headers[i], *h, name_len) == 0 && headers[i][name_len] == ':')
                break;
        headers[i] = *h;
        if (i == n)
            n++;
    }
    headers[n] = NULL;
    return thttp_request("POST", url, headers, body, len, out);
}

bool thttp_get(const char *base, const char *path, const char *token, thttp_resp *out)
{
    const char *headers[2] = {NULL, NULL};
    char url[512], auth[256];

    snprintf(url, sizeof url, "%s%s", base, path);
    if (token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        headers[0] = auth;
    }
    return thttp_request("GET", url, headers, NULL, 0, out);
}
