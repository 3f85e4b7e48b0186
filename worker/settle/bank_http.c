/* worker/settle/bank_http.c - a batch of transfers at once over kept-alive connections, and the
 * lookup that decides an outcome nobody heard */
#include "worker/settle/bank_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "shared/lib/log.h"
#include "worker/settle/settle.h"

#define BODY_MAX 16384 /* more than any answer of section 12; the rest is dropped */

/* One request in flight. Its easy handle is made once and reused batch after batch. */
typedef struct call_io {
    CURL *easy;
    struct curl_slist headers[4]; /* ours, not curl_slist_append()'s: nothing to free */
    char url[700], key[160];
    char *body; /* what we send (owned) */
    char answer[BODY_MAX + 1];
    size_t len;
    bool added; /* in the multi handle */
} call_io;

typedef struct bank_http {
    char base[512];
    char auth[300]; /* "Authorization: Bearer ..." or "" */
    long timeout_ms;
    CURLM *multi;                 /* keeps the connections between batches */
    call_io io[SETTLE_BATCH_MAX]; /* io[i] serves the call i of each batch */
    metric *executed, *refused, *transient, *unknown;
    metric *lookup_executed, *lookup_absent, *lookup_unknown;
    metric *seconds;
} bank_http;

static size_t on_data(char *ptr, size_t size, size_t n, void *arg)
{
    call_io *io = arg;
    size_t got = size * n, room = BODY_MAX - io->len;

    memcpy(io->answer + io->len, ptr, got < room ? got : room);
    io->len += got < room ? got : room;
    io->answer[io->len] = '\0';
    return got;
}

static bool printable(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return false;
    return true;
}

bank_result bank_http_classify(int curl_code, long status, const char *body,
                               const char *transfer_id, char *reference, size_t ref_len, char *why,
                               size_t why_len)
{
    json_t *root = NULL;
    bank_result r;

    reference[0] = '\0';
    if (curl_code == CURLE_COULDNT_CONNECT || curl_code == CURLE_COULDNT_RESOLVE_HOST) {
        snprintf(why, why_len, "bank unreachable: %s", curl_easy_strerror(curl_code));
        return BANK_TRANSIENT; /* nothing was sent */
    }
    if (curl_code != CURLE_OK || status == 0) {
        /* a timeout, or a connection broken after the request may have arrived */
        snprintf(why, why_len, "bank answer lost: %s", curl_easy_strerror(curl_code));
        return BANK_UNKNOWN;
    }
    root = body ? json_loads(body, 0, NULL) : NULL;
    if (status == 200 || status == 201) {
        const char *st = json_string_value(json_object_get(root, "status"));
        const char *id = json_string_value(json_object_get(root, "transfer_id"));
        const char *ref = json_string_value(json_object_get(root, "bank_reference"));

        if (st && strcmp(st, "executed") == 0 && id && strcmp(id, transfer_id) == 0 && ref &&
            printable(ref, ref_len)) {
            snprintf(reference, ref_len, "%s", ref);
            r = BANK_OK;
        } else {
            snprintf(why, why_len, "bank answered %ld without executed", status);
            r = BANK_UNKNOWN; /* never settle without the bank's "executed" */
        }
    } else if (status == 409 || status == 429 || status >= 500) {
        const char *code = json_string_value(json_object_get(root, "code"));

        snprintf(why, why_len, "bank answered %ld %s", status, code ? code : "");
        r = BANK_TRANSIENT;
    } else if (status >= 400) {
        const char *code = json_string_value(json_object_get(root, "code"));
        const char *detail = json_string_value(json_object_get(root, "detail"));

        snprintf(why, why_len, "bank refused: %ld %s: %.120s", status, code ? code : "none",
                 detail ? detail : "");
        r = BANK_PERMANENT;
    } else {
        snprintf(why, why_len, "bank answered %ld", status);
        r = BANK_UNKNOWN;
    }
    json_decref(root);
    return r;
}

static char *transfer_body(const payment *p)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:s,s:{s:s,s:s}}", "transfer_id", p->event_id,
                          "payment_id", p->payment_id, "method", p->method, "amount_cents",
                          (json_int_t)p->amount_cents, "currency", p->currency, "payee", "bank",
                          p->payee_bank, "account", p->payee_account);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

    json_decref(o);
    return s;
}

/* The easy handle of @io with the options every request shares; false without memory. */
static bool easy_ready(const bank_http *b, call_io *io)
{
    if (io->easy != NULL)
        return true;
    if ((io->easy = curl_easy_init()) == NULL)
        return false;
    curl_easy_setopt(io->easy, CURLOPT_TIMEOUT_MS, b->timeout_ms); /* connecting included */
    curl_easy_setopt(io->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(io->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(io->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(io->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(io->easy, CURLOPT_WRITEDATA, io);
    curl_easy_setopt(io->easy, CURLOPT_HTTPHEADER, io->headers);
    return true;
}

/* Start the request of @call on @io: a POST of the transfer, or (@lookup) its GET. */
static bool start(bank_http *b, call_io *io, const bank_call *call, bool lookup)
{
    int h = 0;

    io->len = 0;
    io->answer[0] = '\0';
    if (!easy_ready(b, io))
        return false;
    if (lookup) {
        snprintf(io->url, sizeof io->url, "%s/v1/transfers/%s", b->base, call->p->event_id);
        curl_easy_setopt(io->easy, CURLOPT_HTTPGET, 1L);
    } else {
        snprintf(io->url, sizeof io->url, "%s/v1/transfers", b->base);
        snprintf(io->key, sizeof io->key, "Idempotency-Key: %s", call->p->event_id);
        io->headers[h++].data = "Content-Type: application/json";
        io->headers[h++].data = io->key;
        if ((io->body = transfer_body(call->p)) == NULL)
            return false;
        curl_easy_setopt(io->easy, CURLOPT_POSTFIELDS, io->body);
    }
    io->headers[h++].data = "Expect:"; /* no 100-continue round trip */
    if (b->auth[0])
        io->headers[h++].data = b->auth;
    for (int i = 0; i < h; i++)
        io->headers[i].next = i + 1 < h ? &io->headers[i + 1] : NULL;
    curl_easy_setopt(io->easy, CURLOPT_URL, io->url);
    io->added = curl_multi_add_handle(b->multi, io->easy) == CURLM_OK;
    return io->added;
}

/* After a request: the handle leaves the multi (its connection stays in the pool). */
static void finish(bank_http *b, call_io *io)
{
    if (io->added)
        curl_multi_remove_handle(b->multi, io->easy);
    io->added = false;
    free(io->body);
    io->body = NULL;
}

/* Run every started request to its end; @codes[i] gets each one's CURLcode. */
static void run_all(bank_http *b, call_io *io, int *codes, int n)
{
    int running = 1, left;
    CURLMsg *msg;

    while (running > 0) {
        if (curl_multi_perform(b->multi, &running) != CURLM_OK)
            break;
        if (running > 0)
            curl_multi_poll(b->multi, NULL, 0, 100, NULL);
    }
    while ((msg = curl_multi_info_read(b->multi, &left)) != NULL)
        for (int i = 0; i < n; i++)
            if (msg->msg == CURLMSG_DONE && io[i].added && io[i].easy == msg->easy_handle)
                codes[i] = (int)msg->data.result;
}

/* One round of requests for the calls marked in @todo (POSTs, or lookups). */
static void round_trip(bank_http *b, bank_call *calls, const bool *todo, int n, bool lookup)
{
    call_io *io = b->io;
    int codes[SETTLE_BATCH_MAX];

    if (n > SETTLE_BATCH_MAX)
        return; /* never: a batch is at most SETTLE_BATCH_MAX; nothing is decided */
    for (int i = 0; i < n; i++) {
        codes[i] = CURLE_FAILED_INIT;
        if (todo[i] && !start(b, &io[i], &calls[i], lookup))
            finish(b, &io[i]);
    }
    run_all(b, io, codes, n);
    for (int i = 0; i < n; i++) {
        long status = 0;
        bank_call *c = &calls[i];

        if (!todo[i])
            continue;
        if (io[i].added)
            curl_easy_getinfo(io[i].easy, CURLINFO_RESPONSE_CODE, &status);
        if (!lookup) {
            c->result =
                bank_http_classify(codes[i], status, io[i].answer, c->p->event_id, c->reference,
                                   sizeof c->reference, c->why, sizeof c->why);
            double took = 0;

            /* each transfer's own time (connecting included), not the batch's */
            if (io[i].added &&
                curl_easy_getinfo(io[i].easy, CURLINFO_TOTAL_TIME, &took) == CURLE_OK)
                metrics_observe(b->seconds, took);
        } else if (codes[i] == CURLE_OK && status == 404) {
            c->result = BANK_TRANSIENT; /* not executed: the normal retry budget decides */
            c->absent = true;
            snprintf(c->why, sizeof c->why, "bank has no such transfer (answer lost earlier)");
            metrics_add(b->lookup_absent, 1);
        } else if (bank_http_classify(codes[i], status, io[i].answer, c->p->event_id, c->reference,
                                      sizeof c->reference, c->why, sizeof c->why) == BANK_OK) {
            c->result = BANK_OK;
            metrics_add(b->lookup_executed, 1);
        } else {
            c->result = BANK_UNKNOWN;
            snprintf(c->why, sizeof c->why, "bank answer lost and its lookup said nothing");
            metrics_add(b->lookup_unknown, 1);
        }
        finish(b, &io[i]);
    }
}

static void http_settle(void *impl, bank_call *calls, int n)
{
    bank_http *b = impl;
    bool *todo = calloc((size_t)n, sizeof *todo);
    bool any = false;

    if (todo == NULL)
        return;
    for (int i = 0; i < n; i++) {
        if (calls[i].p->amount_cents == 0) { /* decided before any call (contract section 12) */
            calls[i].result = BANK_PERMANENT;
            snprintf(calls[i].why, sizeof calls[i].why, "amount is zero");
        } else {
            todo[i] = true;
        }
    }
    round_trip(b, calls, todo, n, false);
    for (int i = 0; i < n; i++) {
        if (!todo[i])
            continue;
        metrics_add(calls[i].result == BANK_OK          ? b->executed
                    : calls[i].result == BANK_PERMANENT ? b->refused
                    : calls[i].result == BANK_TRANSIENT ? b->transient
                                                        : b->unknown,
                    1);
        todo[i] = calls[i].result == BANK_UNKNOWN;
        any = any || todo[i];
        if (todo[i])
            log_warn("bank_outcome_unknown", "event_id=%s error=\"%s\"", calls[i].p->event_id,
                     calls[i].why);
    }
    if (any)
        round_trip(b, calls, todo, n, true); /* ask the bank what became of them */
    free(todo);
}

static void http_free(void *impl)
{
    bank_http *b = impl;

    if (b == NULL)
        return;
    for (int i = 0; i < SETTLE_BATCH_MAX; i++)
        if (b->io[i].easy != NULL)
            curl_easy_cleanup(b->io[i].easy);
    curl_multi_cleanup(b->multi);
    free(b);
}

gw_err bank_http_new(const gw_config *cfg, metrics *m, bank *out)
{
    bank_http *b = calloc(1, sizeof *b);
    size_t len;

    if (b == NULL || (b->multi = curl_multi_init()) == NULL) {
        free(b);
        return GW_ERR_NOMEM;
    }
    snprintf(b->base, sizeof b->base, "%s", cfg->bank_url);
    len = strlen(b->base);
    while (len > 0 && b->base[len - 1] == '/')
        b->base[--len] = '\0';
    if (cfg->bank_token != NULL)
        snprintf(b->auth, sizeof b->auth, "Authorization: Bearer %s", cfg->bank_token);
    b->timeout_ms = cfg->bank_timeout_ms;
    /* the whole batch at once; connections stay open for the next one */
    curl_multi_setopt(b->multi, CURLMOPT_MAXCONNECTS, (long)SETTLE_BATCH_MAX);
    b->executed = metrics_counter(m, "paygw_worker_bank_calls_total", "outcome=\"executed\"",
                                  "Transfers sent to the HTTP bank, by what its answer meant.");
    b->refused = metrics_counter(m, "paygw_worker_bank_calls_total", "outcome=\"refused\"", "");
    b->transient = metrics_counter(m, "paygw_worker_bank_calls_total", "outcome=\"transient\"", "");
    b->unknown = metrics_counter(m, "paygw_worker_bank_calls_total", "outcome=\"unknown\"", "");
    b->lookup_executed =
        metrics_counter(m, "paygw_worker_bank_lookups_total", "result=\"executed\"",
                        "Unknown outcomes looked up at the bank, by what it said.");
    b->lookup_absent =
        metrics_counter(m, "paygw_worker_bank_lookups_total", "result=\"not_executed\"", "");
    b->lookup_unknown =
        metrics_counter(m, "paygw_worker_bank_lookups_total", "result=\"unknown\"", "");
    b->seconds = metrics_histogram(m, "paygw_worker_bank_call_seconds", NULL,
                                   "Each request to the HTTP bank, connecting included.",
                                   metrics_latency_bounds, metrics_latency_nbounds);
    out->impl = b;
    out->settle = http_settle;
    out->free = http_free;
    log_info("bank_http", "url=%s timeout_ms=%ld token=%s", b->base, b->timeout_ms,
             b->auth[0] ? "set" : "unset");
    return GW_OK;
}
