/* banksim/server.c - routes, validation and answers; faults are applied here, after the store.
 * A new transfer suspends its connection until the store's group commit calls back. */
#include "banksim/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>
#include <microhttpd.h>

#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"
#include "shared/lib/token.h"
#include "shared/payment.h"

#define BODY_MAX         (64 * 1024)
#define CONNECTION_LIMIT 512
#define IDLE_TIMEOUT_S   30
#define LIST_DEFAULT     100
#define LIST_MAX         1000

struct server {
    struct MHD_Daemon *daemon;
    server_options opt;
    pthread_mutex_t lock;
    pthread_cond_t idle; /* no connection is suspended */
    int suspended;
    bool stopping; /* no new suspensions: answers are made in place */
};

/* Where a POST of a transfer is. */
typedef enum post_phase {
    POST_NEW,
    POST_STORING, /* suspended: handed to the store's writer */
    POST_DECIDED, /* the answer is known (status, t), maybe after a late wait */
} post_phase;

/* The state of one request: its body, read in chunks, and a POST's answer in the making. */
typedef struct request {
    char *body; /* owned, NUL-terminated */
    size_t len;
    bool too_large;
    post_phase phase;
    server *srv;
    struct MHD_Connection *conn;
    store_transfer t;
    gw_err stored;   /* the store's verdict on a new transfer */
    unsigned status; /* POST_DECIDED: 200 or 201; 0: not recorded (503) */
    bool logged;     /* the verdict's log line is written */
    bool delayed;    /* the late wait is done */
    rules_faults faults;
    long call;
} request;

/* What a handler wants done with the connection. */
typedef enum outcome { ANSWERED, DROP } outcome;

/* reply_text - queue @status with the JSON @text (@mode: MHD's, for who frees it). */
static outcome reply_text(struct MHD_Connection *conn, unsigned status, char *text,
                          enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp;

    resp = MHD_create_response_from_buffer(strlen(text), text, mode);
    if (resp == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(text);
        return DROP;
    }
    (void)MHD_add_response_header(resp, "Content-Type", "application/json");
    (void)MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (status == 401)
        (void)MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (MHD_queue_response(conn, status, resp) != MHD_YES)
        log_warn("http_queue_failed", "status=%u", status);
    MHD_destroy_response(resp);
    return ANSWERED;
}

/* reply - queue @status with @body (steals) as application/json. */
static outcome reply(struct MHD_Connection *conn, unsigned status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

    json_decref(body);
    if (text == NULL)
        return DROP; /* out of memory: no answer is better than a wrong one */
    return reply_text(conn, status, text, MHD_RESPMEM_MUST_FREE);
}

/* reply_error - {"code", "detail"} with a printf-style detail. */
__attribute__((format(printf, 4, 5))) static outcome
reply_error(struct MHD_Connection *conn, unsigned status, const char *code, const char *fmt, ...)
{
    char detail[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return reply(conn, status, json_pack("{s:s,s:s}", "code", code, "detail", detail));
}

/* The answer for an executed transfer, a new object. */
static json_t *result_json(const store_transfer *t)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:I}", "transfer_id", t->transfer_id, "status", "executed",
                     "bank_reference", t->bank_reference, "payment_id", t->payment_id,
                     "amount_cents", (json_int_t)t->amount_cents);
}

/* The answer for one executed transfer. Its ids passed payment_id_valid() and the reference is
 * ours, so the JSON is printed as it is, the hot path's one allocation being MHD's copy. */
static outcome reply_result(struct MHD_Connection *conn, unsigned status, const store_transfer *t)
{
    char text[320];
    int n;

    if (!json_plain(t->transfer_id) || !json_plain(t->payment_id) || !json_plain(t->bank_reference))
        return reply(conn, status, result_json(t));
    n = snprintf(text, sizeof text,
                 "{\"transfer_id\":\"%s\",\"status\":\"executed\",\"bank_reference\":\"%s\","
                 "\"payment_id\":\"%s\",\"amount_cents\":%lld}",
                 t->transfer_id, t->bank_reference, t->payment_id, (long long)t->amount_cents);
    if (n <= 0 || (size_t)n >= sizeof text)
        return reply(conn, status, result_json(t));
    return reply_text(conn, status, text, MHD_RESPMEM_MUST_COPY);
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name); /* borrowed from MHD */
}

static bool authorized(const server *s, struct MHD_Connection *conn)
{
    const char *given = header(conn, "Authorization");

    if (s->opt.token == NULL)
        return true;
    if (given == NULL || strncmp(given, "Bearer ", 7) != 0)
        return false;
    return token_equal(given + 7, strlen(given + 7), s->opt.token);
}

/* A string member of @o into @out; false when absent, empty or too long. */
static bool take_str(const json_t *o, const char *key, char *out, size_t size)
{
    const char *v = json_string_value(json_object_get(o, key)); /* borrowed from o */

    return v != NULL && v[0] != '\0' && (size_t)snprintf(out, size, "%s", v) < size;
}

/* The body of a POST into *@t; on false @why names the field. */
static bool transfer_from_body(const json_t *root, store_transfer *t, char *why, size_t wlen)
{
    const json_t *payee = json_object_get(root, "payee"), *amount; /* borrowed from root */

    memset(t, 0, sizeof *t);
    if (!json_is_object(root))
        return snprintf(why, wlen, "the body must be a JSON object"), false;
    if (!take_str(root, "transfer_id", t->transfer_id, sizeof t->transfer_id) ||
        !payment_id_valid(t->transfer_id, strlen(t->transfer_id)))
        return snprintf(why, wlen, "transfer_id must be 1..64 of A-Z a-z 0-9 . _ : -"), false;
    if (!take_str(root, "payment_id", t->payment_id, sizeof t->payment_id) ||
        !payment_id_valid(t->payment_id, strlen(t->payment_id)))
        return snprintf(why, wlen, "payment_id must be 1..64 of A-Z a-z 0-9 . _ : -"), false;
    if (!take_str(root, "method", t->method, sizeof t->method))
        return snprintf(why, wlen, "method must be a string of 1..%d", STORE_METHOD_MAX), false;
    if (!take_str(root, "currency", t->currency, sizeof t->currency) || strlen(t->currency) != 3)
        return snprintf(why, wlen, "currency must be 3 letters"), false;
    amount = json_object_get(root, "amount_cents");
    if (!json_is_integer(amount))
        return snprintf(why, wlen, "amount_cents must be an integer"), false;
    t->amount_cents = (int64_t)json_integer_value(amount);
    if (!json_is_object(payee) || !take_str(payee, "bank", t->payee_bank, sizeof t->payee_bank) ||
        !take_str(payee, "account", t->payee_account, sizeof t->payee_account))
        return snprintf(why, wlen, "payee must be {\"bank\", \"account\"} (1..%d, 1..%d)",
                        STORE_BANK_MAX, STORE_ACCOUNT_MAX),
               false;
    return true;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The business checks of a new transfer: false when refused (answered in *@done). */
static bool may_execute(server *s, struct MHD_Connection *conn, const store_transfer *t, long call,
                        outcome *done)
{
    char why[160];

    if (t->amount_cents <= 0) {
        log_info("transfer_refused", "transfer_id=%s payment_id=%s code=invalid_amount",
                 t->transfer_id, t->payment_id);
        *done = reply_error(conn, 422, "invalid_amount", "amount_cents must be positive");
        return false;
    }
    switch (rules_decide(s->opt.rules, t->payee_bank, t->payee_account, call, why, sizeof why)) {
    case RULES_UNAVAILABLE:
        log_info("transfer_refused", "transfer_id=%s payment_id=%s code=bank_unavailable call=%ld",
                 t->transfer_id, t->payment_id, call);
        *done = reply_error(conn, 503, "bank_unavailable", "%s", why);
        return false;
    case RULES_BLOCKED:
        log_info("transfer_refused", "transfer_id=%s payment_id=%s code=account_blocked",
                 t->transfer_id, t->payment_id);
        *done = reply_error(conn, 422, "account_blocked", "%s", why);
        return false;
    case RULES_EXECUTE:
        break;
    }
    return true;
}

/* The store's verdict on req->t into req->status (0: not recorded), logged once. */
static void decide_stored(request *req)
{
    const store_transfer *t = &req->t;

    req->phase = POST_DECIDED;
    req->status = req->stored == GW_OK ? 201 : req->stored == GW_ERR_CONFLICT ? 200 : 0;
    if (req->logged)
        return;
    req->logged = true;
    if (req->stored == GW_ERR_CONFLICT) /* the same key at once on another connection: it won */
        log_info("transfer_replayed", "transfer_id=%s reference=%s", t->transfer_id,
                 t->bank_reference);
    else if (req->stored != GW_OK)
        log_info("transfer_refused", "transfer_id=%s payment_id=%s code=storage_unavailable",
                 t->transfer_id, t->payment_id);
    else
        log_info("transfer_executed",
                 "transfer_id=%s payment_id=%s reference=%s amount_cents=%" PRId64 " seq=%" PRId64,
                 t->transfer_id, t->payment_id, t->bank_reference, t->amount_cents, t->seq);
}

/* Take the connection of @req off the event loop until resume(); false once stopping. */
static bool suspend(server *s, request *req)
{
    bool ok;

    pthread_mutex_lock(&s->lock);
    if ((ok = !s->stopping)) {
        s->suspended++;
        MHD_suspend_connection(req->conn);
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

/* Give the connection of @req back to the event loop, which answers it; @req is its from here. */
static void resume(request *req)
{
    server *s = req->srv;

    MHD_resume_connection(req->conn);
    pthread_mutex_lock(&s->lock);
    if (--s->suspended == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
}

static void *late_main(void *arg)
{
    request *req = arg;

    sleep_ms(req->faults.late_ms);
    resume(req);
    return NULL;
}

/* A suspended request whose answer is decided: after its late wait (a thread of its own, so it
 * holds up nobody else), or now. */
static void answer_when_due(request *req)
{
    pthread_attr_t attr;
    pthread_t th;
    bool started = false;

    if (req->status != 0 && req->faults.late_ms > 0) {
        log_info("fault_applied", "fault=late transfer_id=%s ms=%d", req->t.transfer_id,
                 req->faults.late_ms);
        req->delayed = true;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&th, &attr, late_main, req) == 0;
        pthread_attr_destroy(&attr);
        req->delayed = started; /* else the wait happens in place, after resume() */
    }
    if (!started)
        resume(req);
}

/* The store's callback, on its writer thread: the transfer is durable (or was not recorded). */
static void on_stored(void *arg)
{
    request *req = arg;

    if (req->faults.late_ms > 0)
        decide_stored(req); /* its log line now, not after the wait */
    else
        req->phase = POST_DECIDED; /* logged on the connection's thread, off the writer's */
    req->status = req->stored == GW_OK ? 201 : req->stored == GW_ERR_CONFLICT ? 200 : 0;
    answer_when_due(req);
}

/* The answer to a POST whose fate is decided (req->status, req->t): faults late and drop. */
static outcome answer_post(struct MHD_Connection *conn, request *req)
{
    const char *key = req->t.transfer_id;

    if (req->status == 0)
        return reply_error(conn, 503, "storage_unavailable", "the transfer was not recorded");
    if (req->faults.late_ms > 0 && !req->delayed) {
        log_info("fault_applied", "fault=late transfer_id=%s ms=%d", key, req->faults.late_ms);
        sleep_ms(req->faults.late_ms);
    }
    if (req->faults.drop) {
        log_info("fault_applied", "fault=%s transfer_id=%s call=%ld",
                 req->faults.drop_always ? "drop-after-execute" : "drop-first", key, req->call);
        return DROP;
    }
    return reply_result(conn, req->status, &req->t);
}

static outcome post_transfer(server *s, struct MHD_Connection *conn, request *req)
{
    const char *ctype = header(conn, "Content-Type"), *key = header(conn, "Idempotency-Key");
    char why[160];
    json_t *root = NULL;
    store_transfer *t = &req->t, old;
    outcome done = ANSWERED;

    if (req->phase == POST_DECIDED) { /* resumed */
        if (!req->logged)
            decide_stored(req);
        return answer_post(conn, req);
    }
    if (ctype == NULL || strncasecmp(ctype, "application/json", 16) != 0 ||
        (ctype[16] != '\0' && ctype[16] != ';' && ctype[16] != ' '))
        return reply_error(conn, 415, "unsupported_media_type", "Content-Type: application/json");
    if (req->too_large)
        return reply_error(conn, 413, "body_too_large", "at most %d bytes", BODY_MAX);
    if (key == NULL || !payment_id_valid(key, strlen(key)))
        return reply_error(conn, 400, "invalid_idempotency_key",
                           "Idempotency-Key must be 1..64 of A-Z a-z 0-9 . _ : -");
    if (json_strict_parse(req->body ? req->body : "", req->len, JSON_STRICT_MAX_DEPTH, &root, why,
                          sizeof why) != GW_OK)
        return reply_error(conn, 400, "invalid_json", "%s", why);
    if (!transfer_from_body(root, t, why, sizeof why)) {
        json_decref(root);
        return reply_error(conn, 422, "invalid_request", "%s", why);
    }
    json_decref(root);
    if (strcmp(t->transfer_id, key) != 0)
        return reply_error(conn, 422, "key_mismatch", "transfer_id must equal Idempotency-Key");

    req->call = rules_next_call(s->opt.rules, key);
    rules_faults_for(s->opt.rules, t->payee_bank, t->payee_account, req->call, &req->faults);
    if (req->faults.status_500) {
        log_info("fault_applied", "fault=5xx-first transfer_id=%s call=%ld", key, req->call);
        return reply_error(conn, 500, "bank_error", "simulated failure (5xx-first)");
    }
    if (store_find(s->opt.store, key, &old)) {
        if (old.amount_cents != t->amount_cents || strcmp(old.payment_id, t->payment_id) != 0)
            log_warn("transfer_replay_differs", "transfer_id=%s", key);
        log_info("transfer_replayed", "transfer_id=%s reference=%s call=%ld", key,
                 old.bank_reference, req->call);
        *t = old;
        req->status = 200;
        req->phase = POST_DECIDED;
        req->logged = true;
        if (req->faults.late_ms > 0 && suspend(s, req)) {
            answer_when_due(req);
            return ANSWERED; /* answered when resumed */
        }
        return answer_post(conn, req);
    }
    if (!may_execute(s, conn, t, req->call, &done))
        return done;
    memcpy(t->bank_reference, "BSIM-", 5);
    token_unique_hex(t->bank_reference + 5, 8);
    if (store_durable(s->opt.store) && suspend(s, req)) {
        /* answered when the store's writer has made it durable and resumes the connection */
        req->phase = POST_STORING;
        if (store_submit(s->opt.store, t, &req->stored, on_stored, req) != GW_OK) {
            req->stored = GW_ERR_NOMEM;
            req->phase = POST_DECIDED;
            resume(req);
        }
        return ANSWERED;
    }
    req->stored = store_execute(s->opt.store, t);
    decide_stored(req);
    return answer_post(conn, req);
}

static outcome get_transfer(server *s, struct MHD_Connection *conn, const char *id)
{
    store_transfer t;

    if (!payment_id_valid(id, strlen(id)) || !store_find(s->opt.store, id, &t))
        return reply_error(conn, 404, "not_found", "no executed transfer with this id");
    return reply_result(conn, 200, &t);
}

/* A whole decimal number @lo..@hi from @s; false when it is anything else. */
static bool parse_num(const char *s, long long lo, long long hi, long long *out)
{
    char *end;

    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && *out >= lo && *out <= hi;
}

static outcome list_transfers(server *s, struct MHD_Connection *conn)
{
    const char *status = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "status");
    const char *lim = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit");
    const char *after = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "after");
    long long limit = LIST_DEFAULT, from = 0;
    store_transfer *page = NULL;
    json_t *items, *body;
    bool more = false;
    size_t n;
    char next[24];

    if (status != NULL && strcmp(status, "executed") != 0)
        return reply_error(conn, 400, "invalid_query", "status must be executed");
    if (lim != NULL && !parse_num(lim, 1, LIST_MAX, &limit))
        return reply_error(conn, 400, "invalid_query", "limit must be 1..%d", LIST_MAX);
    if (after != NULL && !parse_num(after, 0, INT64_MAX, &from))
        return reply_error(conn, 400, "invalid_cursor", "after must be a cursor from next");
    if ((page = malloc((size_t)limit * sizeof *page)) == NULL)
        return DROP;
    n = store_list(s->opt.store, (int64_t)from, (size_t)limit, page, &more);
    items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, result_json(&page[i])); /* steals */
    if (more)
        snprintf(next, sizeof next, "%" PRId64, page[n - 1].seq);
    body = json_pack("{s:o,s:o}", "items", items, "next", more ? json_string(next) : json_null());
    free(page);
    return reply(conn, 200, body);
}

static outcome route(server *s, struct MHD_Connection *conn, const char *url, const char *method,
                     request *req)
{
    static const char prefix[] = "/v1/transfers/";
    bool get = strcmp(method, "GET") == 0;

    if (strcmp(url, "/healthz") == 0)
        return reply(conn, 200, json_pack("{s:s}", "status", "ok"));
    if (strncmp(url, "/v1/", 4) != 0)
        return reply_error(conn, 404, "not_found", "no such route");
    if (!authorized(s, conn))
        return reply_error(conn, 401, "unauthorized", "Authorization: Bearer <BANK_TOKEN>");
    if (strcmp(url, "/v1/transfers") == 0) {
        if (strcmp(method, "POST") == 0)
            return post_transfer(s, conn, req);
        if (get)
            return list_transfers(s, conn);
        return reply_error(conn, 405, "method_not_allowed", "GET or POST");
    }
    if (strncmp(url, prefix, sizeof prefix - 1) == 0 && strchr(url + sizeof prefix - 1, '/') == 0) {
        if (get)
            return get_transfer(s, conn, url + sizeof prefix - 1);
        return reply_error(conn, 405, "method_not_allowed", "GET");
    }
    return reply_error(conn, 404, "not_found", "no such route");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
    request *req = *req_cls;

    (void)version;
    if (req == NULL) { /* first call: headers only */
        if ((req = calloc(1, sizeof *req)) == NULL)
            return MHD_NO;
        req->srv = cls;
        req->conn = conn;
        *req_cls = req;
        return MHD_YES;
    }
    if (*upload_size > 0) { /* body chunks */
        size_t n = *upload_size;
        char *nb;

        *upload_size = 0;
        if (req->too_large || req->len + n > BODY_MAX ||
            (nb = realloc(req->body, req->len + n + 1)) == NULL) {
            req->too_large = true; /* read on, keep nothing: the answer is 413 */
            return MHD_YES;
        }
        memcpy(nb + req->len, upload, n);
        req->len += n;
        nb[req->len] = '\0';
        req->body = nb;
        return MHD_YES;
    }
    /* MHD_NO closes the connection with nothing sent: the answer is lost, as a fault wants */
    return route(cls, conn, url, method, req) == DROP ? MHD_NO : MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode code)
{
    request *req = *req_cls;

    (void)cls;
    (void)conn;
    (void)code;
    if (req == NULL)
        return;
    free(req->body);
    free(req);
    *req_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[256];

    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    log_debug("http_server", "message=%s", msg);
}

gw_err server_start(const server_options *opt, server **out)
{
    server *s = calloc(1, sizeof *s);
    struct sockaddr_in sa = {0};
    const union MHD_DaemonInfo *info;
    unsigned port;

    if (s == NULL)
        return GW_ERR_NOMEM;
    s->opt = *opt;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(opt->listen.port);
    if (inet_pton(AF_INET, opt->listen.host, &sa.sin_addr) != 1) {
        free(s);
        return GW_ERR_INVALID;
    }
    /* one event loop (on two cores a second one cost more in thread switches than it gained):
     * a request that waits (the store, a late answer) is suspended, not a thread parked per
     * connection. poll(), not epoll: libmicrohttpd's epoll loop waits again, with its full
     * timeout, after a wait that returned exactly 128 events, and a batch of 128 requests then
     * sat unread until the worker gave up on it (decision 28, test_bursts_of_128) */
    s->daemon = MHD_start_daemon(
        MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        on_request, s, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)CONNECTION_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, MHD_OPTION_END);
    if (s->daemon == NULL) {
        log_error("http_listen_failed", "host=%s port=%u", opt->listen.host,
                  (unsigned)opt->listen.port);
        pthread_cond_destroy(&s->idle);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return GW_ERR_INVALID;
    }
    info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    port = info ? info->port : opt->listen.port;
    log_info("listening", "host=%s port=%u auth=%s", opt->listen.host, port,
             opt->token ? "bearer" : "none");
    *out = s;
    return GW_OK;
}

void server_stop(server *s)
{
    if (s == NULL)
        return;
    /* no suspended connection may be left when the daemon stops: from now on answers are made
     * in place, and the ones in the store or in a late wait are waited for */
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    while (s->suspended > 0)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    MHD_stop_daemon(s->daemon); /* closes the listener and the connections, joins the pool */
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
