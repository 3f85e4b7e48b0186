/* worker/settle/bank_http.c - a batch of transfers at once over kept-alive connections, and the
 * lookup that decides an outcome nobody heard */
#include "worker/settle/bank_http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"
#include "worker/settle/curl_loop.h"
#include "worker/settle/settle.h"

#define BODY_MAX 16384 /* more than any answer of section 12; the rest is dropped */
/* a transfer's JSON: its fields are bounded (shared/payment.h), the longest about 330 bytes */
#define TRANSFER_BODY_MAX 512

/* One request in flight. Its easy handle is made once and reused batch after batch. */
typedef struct call_io {
    CURL *easy;
    struct curl_slist headers[4]; /* ours, not curl_slist_append()'s: nothing to free */
    char url[700], key[160];
    char body[TRANSFER_BODY_MAX]; /* what we send */
    char answer[BODY_MAX + 1];
    size_t len;
    bool added; /* in the multi handle */
    bool done;  /* its transfer ended, as @code says */
    int code;   /* CURLcode */
} call_io;

/* Where a slot's batch is: IDLE -> SENT (by the worker) -> POSTING -> LOOKING_UP -> DONE (by
 * the bank's thread) -> IDLE (finish(), by the worker). */
typedef enum slot_state {
    SLOT_IDLE,
    SLOT_SENT,
    SLOT_POSTING,
    SLOT_LOOKING_UP,
    SLOT_DONE
} slot_state;

/* The calls of one batch, from send() to finish(). Between SENT and DONE only the bank's thread
 * touches it; the lock hands it over. */
typedef struct slot {
    call_io io[SETTLE_BATCH_MAX]; /* io[i] serves the call i of each batch */
    bank_call *calls;             /* borrowed */
    int n;
    bool todo[SETTLE_BATCH_MAX]; /* the calls that need a request in this round */
    slot_state state;            /* under bank_http.lock */
    bool abandon;                /* under bank_http.lock: stop waiting, DONE at once */
} slot;

typedef struct bank_http {
    char base[512];
    char auth[300]; /* "Authorization: Bearer ..." or "" */
    long timeout_ms;
    curl_loop loop; /* the bank's thread's; its multi keeps the connections between batches */
    slot slots[BANK_SLOTS];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t done; /* a slot became DONE */
    bool quit;           /* under lock */
    bool started;
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

/*
 * The transfer of @p as JSON into @buf. Every field passed payment_parse()'s
 * charsets (shared/payment.c), so it is printed as it is: no allocation per
 * call. A field that is not plain anyway is not sent (false).
 */
static bool transfer_body(const payment *p, char *buf, size_t len)
{
    const char *fields[] = {p->event_id, p->payment_id, p->method,
                            p->currency, p->payee_bank, p->payee_account};
    int n;

    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!json_plain(fields[i]))
            return false;
    n = snprintf(buf, len,
                 "{\"transfer_id\":\"%s\",\"payment_id\":\"%s\",\"method\":\"%s\","
                 "\"amount_cents\":%lld,\"currency\":\"%s\",\"payee\":{\"bank\":\"%s\","
                 "\"account\":\"%s\"}}",
                 p->event_id, p->payment_id, p->method, (long long)p->amount_cents, p->currency,
                 p->payee_bank, p->payee_account);
    return n > 0 && (size_t)n < len;
}

/* The easy handle of @io with the options every request shares; false without memory. */
static bool easy_ready(bank_http *b, call_io *io)
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
    curl_easy_setopt(io->easy, CURLOPT_PRIVATE, io);
    curl_easy_setopt(io->easy, CURLOPT_HTTPHEADER, io->headers);
    curl_loop_easy(&b->loop, io->easy);
    return true;
}

/* Start the request of @call on @io: a POST of the transfer, or (@lookup) its GET. */
static bool start(bank_http *b, call_io *io, const bank_call *call, bool lookup)
{
    int h = 0;

    io->len = 0;
    io->answer[0] = '\0';
    io->done = false;
    io->code = CURLE_FAILED_INIT;
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
        if (!transfer_body(call->p, io->body, sizeof io->body))
            return false;
        curl_easy_setopt(io->easy, CURLOPT_POSTFIELDS, io->body);
    }
    io->headers[h++].data = "Expect:"; /* no 100-continue round trip */
    if (b->auth[0])
        io->headers[h++].data = b->auth;
    for (int i = 0; i < h; i++)
        io->headers[i].next = i + 1 < h ? &io->headers[i + 1] : NULL;
    curl_easy_setopt(io->easy, CURLOPT_URL, io->url);
    io->added = curl_multi_add_handle(b->loop.multi, io->easy) == CURLM_OK;
    return io->added;
}

/* After a request: the handle leaves the multi (its connection stays in the pool, unless the
 * transfer was still running: then curl closes it). */
static void finish(bank_http *b, call_io *io)
{
    if (io->added)
        curl_multi_remove_handle(b->loop.multi, io->easy);
    io->added = false;
}

/* Note the requests that ended. */
static void collect(bank_http *b)
{
    int left;
    CURLMsg *msg;
    call_io *io;

    while ((msg = curl_multi_info_read(b->loop.multi, &left)) != NULL)
        if (msg->msg == CURLMSG_DONE &&
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&io) == CURLE_OK &&
            io != NULL) {
            io->code = (int)msg->data.result;
            io->done = true;
        }
}

/* Wait for the bank (or a wake-up) up to @wait_ms; note what ended. */
static void step(bank_http *b, int wait_ms)
{
    curl_loop_step(&b->loop, wait_ms);
    collect(b);
}

/* Start the requests of @sl marked in its todo (POSTs, or lookups). */
static void start_slot(bank_http *b, slot *sl, bool lookup)
{
    for (int i = 0; i < sl->n; i++)
        if (sl->todo[i] && !start(b, &sl->io[i], &sl->calls[i], lookup))
            finish(b, &sl->io[i]);
}

static bool slot_ended(const slot *sl)
{
    for (int i = 0; i < sl->n; i++)
        if (sl->io[i].added && !sl->io[i].done)
            return false;
    return true;
}

/* What the answers of @sl's requests mean; each handle leaves the multi. */
static void decide_slot(bank_http *b, slot *sl, bool lookup)
{
    for (int i = 0; i < sl->n; i++) {
        call_io *io = &sl->io[i];
        bank_call *c = &sl->calls[i];
        long status = 0;

        if (!sl->todo[i])
            continue;
        if (io->added)
            curl_easy_getinfo(io->easy, CURLINFO_RESPONSE_CODE, &status);
        if (!lookup) {
            double took = 0;

            c->result =
                bank_http_classify(io->code, status, io->answer, c->p->event_id, c->reference,
                                   sizeof c->reference, c->why, sizeof c->why);
            /* each transfer's own time (connecting included), not the batch's */
            if (io->added && curl_easy_getinfo(io->easy, CURLINFO_TOTAL_TIME, &took) == CURLE_OK)
                metrics_observe(b->seconds, took);
        } else if (io->code == CURLE_OK && status == 404) {
            c->result = BANK_TRANSIENT; /* not executed: the normal retry budget decides */
            c->absent = true;
            snprintf(c->why, sizeof c->why, "bank has no such transfer (answer lost earlier)");
            metrics_add(b->lookup_absent, 1);
        } else if (bank_http_classify(io->code, status, io->answer, c->p->event_id, c->reference,
                                      sizeof c->reference, c->why, sizeof c->why) == BANK_OK) {
            c->result = BANK_OK;
            metrics_add(b->lookup_executed, 1);
        } else {
            c->result = BANK_UNKNOWN;
            snprintf(c->why, sizeof c->why, "bank answer lost and its lookup said nothing");
            metrics_add(b->lookup_unknown, 1);
        }
        finish(b, io);
    }
}

/* The POSTs of @sl have all ended: their outcomes, and the lookups of the unknown ones. The
 * next state. */
static slot_state posted(bank_http *b, slot *sl)
{
    bool any = false;

    decide_slot(b, sl, false);
    for (int i = 0; i < sl->n; i++) {
        bank_call *c = &sl->calls[i];

        if (!sl->todo[i])
            continue;
        metrics_add(c->result == BANK_OK          ? b->executed
                    : c->result == BANK_PERMANENT ? b->refused
                    : c->result == BANK_TRANSIENT ? b->transient
                                                  : b->unknown,
                    1);
        sl->todo[i] = c->result == BANK_UNKNOWN;
        any = any || sl->todo[i];
        if (sl->todo[i])
            log_warn("bank_outcome_unknown", "event_id=%s error=\"%s\"", c->p->event_id, c->why);
    }
    if (!any)
        return SLOT_DONE;
    start_slot(b, sl, true); /* ask the bank what became of them */
    return SLOT_LOOKING_UP;
}

/* One turn of the bank's thread for @sl (lock held on entry and exit). */
static void advance(bank_http *b, slot *sl)
{
    slot_state st = sl->state;

    if (st == SLOT_IDLE || st == SLOT_DONE)
        return;
    pthread_mutex_unlock(&b->lock);
    if (st == SLOT_SENT) {
        start_slot(b, sl, false);
        st = SLOT_POSTING;
    } else if (slot_ended(sl)) {
        st = st == SLOT_POSTING ? posted(b, sl) : (decide_slot(b, sl, true), SLOT_DONE);
    }
    pthread_mutex_lock(&b->lock);
    if (sl->abandon && st != SLOT_DONE) {
        pthread_mutex_unlock(&b->lock);
        for (int i = 0; i < sl->n; i++)
            finish(b, &sl->io[i]);
        pthread_mutex_lock(&b->lock);
        st = SLOT_DONE;
    }
    sl->state = st;
    if (st == SLOT_DONE)
        pthread_cond_broadcast(&b->done);
}

/*
 * The bank's thread: every libcurl call is made here,
 * so the worker's thread hands a batch over and goes on to the COMMIT of the
 * batch before while this one writes the requests and reads the answers.
 */
static void *bank_thread(void *arg)
{
    bank_http *b = arg;

    pthread_mutex_lock(&b->lock);
    while (!b->quit) {
        slot_state mine[BANK_SLOTS];
        bool waiting = false, ended = false;

        for (int k = 0; k < BANK_SLOTS; k++) {
            advance(b, &b->slots[k]);
            mine[k] = b->slots[k].state;
            waiting = waiting || mine[k] == SLOT_POSTING || mine[k] == SLOT_LOOKING_UP;
        }
        pthread_mutex_unlock(&b->lock);
        for (int k = 0; k < BANK_SLOTS; k++) /* slots in these states are this thread's */
            if (mine[k] == SLOT_POSTING || mine[k] == SLOT_LOOKING_UP)
                ended = ended || slot_ended(&b->slots[k]);
        /* an answer, the timer, a send(), an abandon() or the end (wake()) ends the wait */
        if (!ended)
            step(b, waiting ? 100 : 1000);
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

/* The transfers of a batch go to the bank's thread; their answers are waited for in finish(). */
static void http_send(void *impl, int slot_no, bank_call *calls, int n)
{
    bank_http *b = impl;
    slot *sl = &b->slots[slot_no];

    pthread_mutex_lock(&b->lock);
    sl->calls = calls;
    sl->n = n <= SETTLE_BATCH_MAX ? n : 0; /* never more: a batch is at most SETTLE_BATCH_MAX */
    sl->abandon = false;
    for (int i = 0; i < sl->n; i++) {
        sl->todo[i] = calls[i].p->amount_cents != 0;
        if (!sl->todo[i]) { /* decided before any call (contract section 12) */
            calls[i].result = BANK_PERMANENT;
            snprintf(calls[i].why, sizeof calls[i].why, "amount is zero");
        }
    }
    sl->state = SLOT_SENT;
    pthread_mutex_unlock(&b->lock);
    curl_loop_wake(&b->loop);
}

/* Wait until the bank's thread has decided @slot_no (or given it up); the slot is free again. */
static void wait_done(bank_http *b, int slot_no, bool abandon)
{
    slot *sl = &b->slots[slot_no];

    pthread_mutex_lock(&b->lock);
    if (sl->state != SLOT_IDLE) {
        sl->abandon = abandon;
        if (abandon)
            curl_loop_wake(&b->loop);
        while (sl->state != SLOT_DONE)
            pthread_cond_wait(&b->done, &b->lock);
        sl->state = SLOT_IDLE;
        sl->n = 0;
    }
    pthread_mutex_unlock(&b->lock);
}

static void http_finish(void *impl, int slot_no)
{
    wait_done(impl, slot_no, false);
}

static void http_abandon(void *impl, int slot_no)
{
    wait_done(impl, slot_no, true);
}

static void http_free(void *impl)
{
    bank_http *b = impl;

    if (b == NULL)
        return;
    if (b->started) {
        pthread_mutex_lock(&b->lock);
        b->quit = true;
        pthread_mutex_unlock(&b->lock);
        curl_loop_wake(&b->loop);
        pthread_join(b->thread, NULL);
    }
    for (int k = 0; k < BANK_SLOTS; k++)
        for (int i = 0; i < SETTLE_BATCH_MAX; i++)
            if (b->slots[k].io[i].easy != NULL) {
                finish(b, &b->slots[k].io[i]);
                curl_easy_cleanup(b->slots[k].io[i].easy);
            }
    curl_loop_free(&b->loop);
    pthread_cond_destroy(&b->done);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

gw_err bank_http_new(const gw_config *cfg, metrics *m, bank *out)
{
    bank_http *b = calloc(1, sizeof *b);
    size_t len;

    if (b == NULL)
        return GW_ERR_NOMEM;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->done, NULL);
    if (curl_loop_init(&b->loop) != GW_OK) {
        http_free(b);
        return GW_ERR_NOMEM;
    }
    snprintf(b->base, sizeof b->base, "%s", cfg->bank_url);
    len = strlen(b->base);
    while (len > 0 && b->base[len - 1] == '/')
        b->base[--len] = '\0';
    if (cfg->bank_token != NULL)
        snprintf(b->auth, sizeof b->auth, "Authorization: Bearer %s", cfg->bank_token);
    b->timeout_ms = cfg->bank_timeout_ms;
    /* two batches at once; connections stay open for the next ones */
    curl_multi_setopt(b->loop.multi, CURLMOPT_MAXCONNECTS, (long)(BANK_SLOTS * SETTLE_BATCH_MAX));
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
    if (pthread_create(&b->thread, NULL, bank_thread, b) != 0) {
        http_free(b);
        return GW_ERR_NOMEM;
    }
    b->started = true;
    out->impl = b;
    out->send = http_send;
    out->finish = http_finish;
    out->abandon = http_abandon;
    out->free = http_free;
    log_info("bank_http", "url=%s timeout_ms=%ld token=%s", b->base, b->timeout_ms,
             b->auth[0] ? "set" : "unset");
    return GW_OK;
}
