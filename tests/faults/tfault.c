/* tests/faults/tfault.c - the pipeline, a retrying client and the invariants of the fault tests */
#include "tests/faults/tfault.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"
#include "tests/support/tsock.h"

#define REQUEST_TIMEOUT_MS 10000
#define EVENT_DEADLINE_MS  90000
#define QUIET_MS           15000 /* queues drain after the last terminal status */
#define MAX_REPORTED       8     /* failures of one kind printed in full */

static const char *const TERMINAL_SQL =
    "SELECT count(*) FROM payments WHERE status IN ('settled', 'unroutable', 'dead_lettered')";

/* ---- seeded randomness ------------------------------------------------------------------- */

uint64_t tf_seed(const char *test)
{
    const char *s = getenv("GW_FAULT_SEED");
    uint64_t seed;

    if (s != NULL && *s != '\0') {
        seed = strtoull(s, NULL, 10);
    } else {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()) %
               1000000000ULL;
    }
    printf("%s: seed %" PRIu64 " (run again with GW_FAULT_SEED=%" PRIu64 ")\n", test, seed, seed);
    fflush(stdout);
    return seed;
}

void tf_rng_init(tf_rng *r, uint64_t seed)
{
    r->s = seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    if (r->s == 0)
        r->s = 1;
}

uint64_t tf_rng_next(tf_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

long long tf_rng_range(tf_rng *r, long long lo, long long hi)
{
    if (hi <= lo)
        return lo;
    return lo + (long long)(tf_rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* ---- the pipeline -------------------------------------------------------------------------- */

const char *tf_prog_name(tf_prog which)
{
    static const char *const names[] = {"api", "relay", "worker"};

    return names[which];
}

int tf_init(tf_world *w, const char *name)
{
    int rc;

    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    rc = te2e_init(&w->e, name);
    if (rc == 0)
        snprintf(w->amqp_env, sizeof w->amqp_env, "AMQP_URL=%s", w->e.amqp_url);
    return rc;
}

int tf_main(tf_world *w, const char *name, const char *summary, void (*run)(void))
{
    int rc = tf_init(w, name);

    if (rc == 0)
        run();
    else if (rc != 77)
        FAIL("the fixture could not be set up");
    tf_cleanup(w);
    return rc == 77 ? 77 : tcheck_summary(summary);
}

void tf_cleanup(tf_world *w)
{
    for (int i = 0; i < 3; i++)
        if (w->up[i])
            tf_stop(w, (tf_prog)i);
    te2e_cleanup(&w->e);
    pthread_mutex_destroy(&w->lock);
}

tproc *tf_proc(tf_world *w, tf_prog which)
{
    if (!w->up[which])
        return NULL;
    switch (which) {
    case TF_API:
        return w->api.proc;
    case TF_RELAY:
        return w->relay.proc;
    case TF_WORKER:
        return w->worker.proc;
    }
    return NULL;
}

static void set_api_url(tf_world *w, const char *url)
{
    pthread_mutex_lock(&w->lock);
    snprintf(w->api_url, sizeof w->api_url, "%s", url);
    w->api_gen++;
    pthread_mutex_unlock(&w->lock);
}

int tf_api_url(tf_world *w, char *buf, size_t len)
{
    int gen;

    pthread_mutex_lock(&w->lock);
    snprintf(buf, len, "%s", w->api_url);
    gen = w->api_gen;
    pthread_mutex_unlock(&w->lock);
    return gen;
}

bool tf_start(tf_world *w, tf_prog which, const char *failpoints)
{
    char label[160], fp[256];
    const char *extra[8];
    size_t n = 0;
    bool ok;

    snprintf(label, sizeof label, "%s-%s-%d", w->e.name, tf_prog_name(which), ++w->starts[which]);
    if (which == TF_API)
        extra[n++] = w->amqp_env;
    extra[n++] = TF_DELAYS;
    if (which == TF_WORKER)
        extra[n++] = TF_RULES;
    if (failpoints != NULL) {
        snprintf(fp, sizeof fp, "GATEWAY_FAILPOINTS=%s", failpoints);
        extra[n++] = fp;
    }
    extra[n] = NULL;
    switch (which) {
    case TF_API:
        ok = tapi_start(&w->api, label, tdb_url(w->e.db), extra);
        if (ok)
            set_api_url(w, w->api.url);
        break;
    case TF_RELAY:
        ok = tprog_start(&w->relay, TPROG_RELAY, label, &w->e, extra);
        break;
    case TF_WORKER:
    default:
        ok = tprog_start(&w->worker, TPROG_WORKER, label, &w->e, extra);
        break;
    }
    w->up[which] = ok;
    if (!ok)
        fprintf(stderr, "tfault: %s did not start\n", label);
    else if (w->nlogs < TF_MAX_LOGS)
        snprintf(w->logs[w->nlogs++], sizeof w->logs[0], "%s", tproc_log_path(tf_proc(w, which)));
    return ok;
}

bool tf_start_all(tf_world *w, tf_prog fp_prog, const char *fp)
{
    return tf_start(w, TF_WORKER, fp_prog == TF_WORKER ? fp : NULL) &&
           tf_start(w, TF_RELAY, fp_prog == TF_RELAY ? fp : NULL) &&
           tf_start(w, TF_API, fp_prog == TF_API ? fp : NULL);
}

bool tf_running(tf_world *w, tf_prog which)
{
    tproc *p = tf_proc(w, which);

    return p != NULL && tproc_running(p);
}

int tf_reap(tf_world *w, tf_prog which)
{
    tproc *p = tf_proc(w, which);
    int status;

    if (p == NULL)
        return -1;
    if (which == TF_API)
        set_api_url(w, ""); /* the clients wait for the next one */
    status = tproc_wait_exit(p, 10000);
    tproc_free(p);
    switch (which) {
    case TF_API:
        w->api.proc = NULL;
        break;
    case TF_RELAY:
        w->relay.proc = NULL;
        break;
    case TF_WORKER:
        w->worker.proc = NULL;
        break;
    }
    w->up[which] = false;
    return status;
}

int tf_kill9(tf_world *w, tf_prog which)
{
    tproc *p = tf_proc(w, which);

    if (p == NULL)
        return -1;
    if (which == TF_API)
        set_api_url(w, "");
    tproc_signal(p, SIGKILL);
    w->crashes++;
    return tf_reap(w, which);
}

void tf_stop(tf_world *w, tf_prog which)
{
    if (!w->up[which])
        return;
    switch (which) {
    case TF_API:
        set_api_url(w, "");
        tapi_stop(&w->api); /* CHECKs exit 0 */
        break;
    case TF_RELAY:
        tprog_stop(&w->relay, 10000);
        break;
    case TF_WORKER:
        tprog_stop(&w->worker, 10000);
        break;
    }
    w->up[which] = false;
}

void tf_stop_all(tf_world *w)
{
    tf_stop(w, TF_API);
    tf_stop(w, TF_RELAY);
    tf_stop(w, TF_WORKER);
}

int tf_logs_count(const tf_world *w, const char *needle)
{
    int n = 0;

    for (int i = 0; i < w->nlogs; i++) {
        FILE *f = fopen(w->logs[i], "r");
        char line[4096];

        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            n += strstr(line, needle) != NULL;
        if (f != NULL)
            fclose(f);
    }
    return n;
}

void tf_check_logs(const tf_world *w)
{
    int deadlocks = tf_logs_count(w, "sqlstate=40P01");

    CHECK_INT(tf_logs_count(w, "ERROR: AddressSanitizer"), 0);
    CHECK_INT(tf_logs_count(w, "ERROR: LeakSanitizer"), 0);
    CHECK_INT(tf_logs_count(w, "runtime error:"), 0);
    printf("logs of %d processes: %d deadlocks detected (SQLSTATE 40P01)%s\n", w->nlogs, deadlocks,
           deadlocks > 0 ? ": see docs/decisions.md, relay vs worker lock order" : "");
}

/* ---- events --------------------------------------------------------------------------------- */

const char *tf_kind_status(tf_kind k)
{
    switch (k) {
    case TF_SETTLE:
    case TF_RETRY:
        return "settled";
    case TF_REFUSED:
        return "unroutable";
    case TF_ZERO:
        return "dead_lettered";
    }
    return "?";
}

/* The terminal status with the settling attempt, as the check query renders it. */
static const char *kind_outcome(tf_kind k)
{
    switch (k) {
    case TF_SETTLE:
        return "settled/1";
    case TF_RETRY:
        return "settled/2";
    case TF_REFUSED:
        return "unroutable";
    case TF_ZERO:
        return "dead_lettered";
    }
    return "?";
}

tf_event *tf_events(const char *prefix, int n, tf_rng *rng)
{
    static const char *const methods[] = {"pix", "ted", "card"};
    tf_event *ev = calloc((size_t)n, sizeof *ev);

    if (ev == NULL)
        abort();
    for (int i = 0; i < n; i++) {
        tf_event *e = &ev[i];
        long long roll = tf_rng_range(rng, 0, 99);
        const char *method = methods[tf_rng_range(rng, 0, 2)];
        const char *account = "1234-5", *decision = "approved";
        json_t *o;

        snprintf(e->event_id, sizeof e->event_id, "%s-e%d", prefix, i + 1);
        snprintf(e->payment_id, sizeof e->payment_id, "%s-p%d", prefix, i + 1);
        e->amount = tf_rng_range(rng, 1, 5000000);
        e->expect_replay = -1;
        if (roll < 70) {
            e->kind = TF_SETTLE;
        } else if (roll < 84) {
            e->kind = TF_RETRY;
            account = TF_RETRY_ACCOUNT;
        } else if (roll < 93) {
            e->kind = TF_REFUSED;
            decision = "refused";
        } else {
            e->kind = TF_ZERO;
            e->amount = 0;
        }
        o = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:{s:s,s:s}}", "event_id", e->event_id,
                      "payment_id", e->payment_id, "method", method, "decision", decision,
                      "amount_cents", (json_int_t)e->amount, "currency", "BRL", "payee", "bank",
                      "001", "account", account);
        if (tf_rng_range(rng, 0, 1) == 1)
            json_object_set_new(
                o, "payer",
                json_pack("{s:s,s:s}", "name", "Jo\xc3\xa3o da Silva", "document", "12345678909"));
        if (tf_rng_range(rng, 0, 1) == 1)
            json_object_set_new(o, "decided_at", json_string("2026-11-29T12:00:00Z"));
        e->body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (e->body == NULL)
            abort();
    }
    return ev;
}

void tf_events_free(tf_event *ev, int n)
{
    for (int i = 0; ev != NULL && i < n; i++)
        free(ev[i].body);
    free(ev);
}

/* ---- the client ----------------------------------------------------------------------------- */

/* One event until its 202 (or its deadline): the same body, the same event_id, every time. */
static void send_event(tf_load *l, tf_event *ev)
{
    long long deadline = tproc_now_ms() + l->event_ms;
    char base[64], url[128], idem[96];
    const char *headers[] = {"Authorization: Bearer " TAPI_TOKEN, "Content-Type: application/json",
                             idem, NULL};
    long last = -1;

    snprintf(idem, sizeof idem, "Idempotency-Key: %s", ev->event_id);
    for (;;) {
        thttp_resp r;
        const char *rep;
        int pause_ms = 50;

        if (tproc_now_ms() >= deadline || tproc_now_ms() >= atomic_load(&l->end_ms)) {
            pthread_mutex_lock(&l->lock);
            if (ev->tries > 0) /* unsent ones are reported once, by tf_check_invariants() */
                FAIL("%s: no 202 in time (%d tries, %d dropped, %d 503, %d 409, last %ld)",
                     ev->event_id, ev->tries, ev->drops, ev->unavailable, ev->in_flight, last);
            pthread_mutex_unlock(&l->lock);
            return;
        }
        tf_api_url(l->w, base, sizeof base);
        if (base[0] == '\0') { /* the API is down: wait for its successor */
            tproc_sleep_ms(20);
            continue;
        }
        snprintf(url, sizeof url, "%s/v1/payments", base);
        {
            thttp_req req = {.method = "POST",
                             .url = url,
                             .headers = headers,
                             .body = ev->body,
                             .len = strlen(ev->body),
                             .timeout_ms = REQUEST_TIMEOUT_MS};
            thttp_do(&req, &r);
        }
        last = r.status;
        pthread_mutex_lock(&l->lock);
        ev->tries++;
        if (r.status == 202) {
            rep = thttp_header(&r, "Idempotent-Replayed");
            ev->status = 202;
            ev->replayed = rep != NULL && strcmp(rep, "true") == 0;
            ev->fresh_after_drop = !ev->replayed && ev->drops > 0;
            pthread_mutex_unlock(&l->lock);
            if (!CHECK_STR(thttp_json_str(&r, "event_id"), ev->event_id))
                fprintf(stderr, "body: %s\n", r.body);
            atomic_fetch_add(&l->accepted, 1);
            thttp_resp_free(&r);
            return;
        }
        if (r.status == 0) {
            ev->drops++;
        } else if (r.status == 503) {
            ev->unavailable++;
            pause_ms = 200;
        } else if (r.status == 409 && strstr(r.body, "request-in-flight") != NULL) {
            ev->in_flight++;
            pause_ms = 100;
        } else {
            pthread_mutex_unlock(&l->lock);
            FAIL("%s: unexpected answer %ld (try %d): %s", ev->event_id, r.status, ev->tries,
                 r.body);
            thttp_resp_free(&r);
            return;
        }
        pthread_mutex_unlock(&l->lock);
        thttp_resp_free(&r);
        tproc_sleep_ms(pause_ms);
    }
}

static void *client_main(void *arg)
{
    tf_load *l = arg;

    for (;;) {
        int i = atomic_fetch_add(&l->next, 1);
        long long at;

        if (i >= l->n)
            break;
        at = l->t0 + (long long)i * l->pace_us / 1000;
        while (tproc_now_ms() < at && tproc_now_ms() < atomic_load(&l->end_ms))
            tproc_sleep_ms((int)(at - tproc_now_ms() < 20 ? at - tproc_now_ms() : 20));
        send_event(l, &l->ev[i]);
    }
    atomic_fetch_add(&l->finished, 1);
    return NULL;
}

bool tf_load_start(tf_load *l, tf_world *w, tf_event *ev, int n, int clients, int pace_us)
{
    memset(l, 0, sizeof *l);
    l->w = w;
    l->ev = ev;
    l->n = n;
    l->clients = clients > TF_MAX_CLIENTS ? TF_MAX_CLIENTS : clients;
    l->pace_us = pace_us;
    l->event_ms = EVENT_DEADLINE_MS;
    pthread_mutex_init(&l->lock, NULL);
    atomic_init(&l->next, 0);
    atomic_init(&l->finished, 0);
    atomic_init(&l->accepted, 0);
    l->t0 = tproc_now_ms();
    atomic_init(&l->end_ms, l->t0 + (long long)n * pace_us / 1000 + EVENT_DEADLINE_MS);
    for (int i = 0; i < l->clients; i++) {
        if (pthread_create(&l->tid[i], NULL, client_main, l) != 0) {
            FAIL("pthread_create failed");
            atomic_store(&l->next, n); /* the others stop after their event */
            break;
        }
        l->started++;
    }
    return l->started == l->clients;
}

void tf_load_abort(tf_load *l)
{
    atomic_store(&l->end_ms, tproc_now_ms());
}

bool tf_load_done(tf_load *l)
{
    return atomic_load(&l->finished) >= l->started;
}

void tf_load_join(tf_load *l)
{
    for (int i = 0; i < l->started; i++)
        pthread_join(l->tid[i], NULL);
    l->started = 0;
    pthread_mutex_destroy(&l->lock);
}

int tf_load_snapshot(tf_load *l, int *with_row)
{
    int *idx = calloc((size_t)l->n, sizeof *idx), k = 0;

    if (idx == NULL)
        abort();
    *with_row = 0;
    pthread_mutex_lock(&l->lock);
    for (int i = 0; i < l->n; i++)
        if (l->ev[i].drops > 0 && l->ev[i].status == 0 && l->ev[i].expect_replay < 0)
            idx[k++] = i;
    pthread_mutex_unlock(&l->lock);
    for (int j = 0; j < k; j++) {
        tf_event *e = &l->ev[idx[j]];
        long long rows = tdb_long(l->w->e.db, "SELECT count(*) FROM payments WHERE event_id = $1",
                                  e->event_id, NULL);
        long long outbox = tdb_long(l->w->e.db, "SELECT count(*) FROM outbox WHERE event_id = $1",
                                    e->event_id, NULL);

        /* all or nothing: the two rows are one transaction (the payment row is the record) */
        if (!CHECK(rows == outbox && (rows == 0 || rows == 1)))
            fprintf(stderr, "%s: payments %lld, outbox %lld\n", e->event_id, rows, outbox);
        pthread_mutex_lock(&l->lock);
        e->expect_replay = rows > 0;
        pthread_mutex_unlock(&l->lock);
        *with_row += rows > 0;
        printf("  dropped at the crash: %s, %s\n", e->event_id,
               rows > 0 ? "committed (its retry must be a replay)"
                        : "not committed (its retry must be a fresh 202)");
    }
    free(idx);
    return k;
}

/* ---- the invariants ------------------------------------------------------------------------ */

static bool client_checks(tf_load *l, tf_result *res)
{
    int bad = 0;

    pthread_mutex_lock(&l->lock);
    for (int i = 0; i < l->n; i++) {
        tf_event *e = &l->ev[i];

        res->events++;
        if (e->status != 202) {
            if (bad++ < MAX_REPORTED)
                FAIL("%s never got its 202 (%d tries, %d dropped, %d 503)", e->event_id, e->tries,
                     e->drops, e->unavailable);
            continue; /* left out of the expectations below: it must not exist */
        }
        res->accepted++;
        res->replays += e->replayed;
        res->fresh_after_drop += e->fresh_after_drop;
        res->drops += e->drops;
        res->unavailable += e->unavailable;
        /* a replay answers a request that committed before: only after an attempt got no answer */
        if (e->replayed && e->drops == 0 && bad++ < MAX_REPORTED)
            FAIL("%s: Idempotent-Replayed without any dropped attempt", e->event_id);
        if (e->expect_replay >= 0 && e->replayed != (e->expect_replay == 1) && bad++ < MAX_REPORTED)
            FAIL("%s: its payment row %s at the crash, yet the retry got a %s", e->event_id,
                 e->expect_replay ? "existed" : "did not exist",
                 e->replayed ? "replay" : "fresh 202");
    }
    pthread_mutex_unlock(&l->lock);
    return bad == 0;
}

/* {"event_id": "settled/1" | "settled/2" | "unroutable" | "dead_lettered"} of the accepted. */
static char *expected_json(tf_load *l)
{
    json_t *o = json_object();
    char *s;

    for (int i = 0; i < l->n; i++)
        if (l->ev[i].status == 202)
            json_object_set_new(o, l->ev[i].event_id, json_string(kind_outcome(l->ev[i].kind)));
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s == NULL)
        abort();
    return s;
}

/* How each payment ended, as expected_json() spells it; a FULL JOIN finds the extra and lost. */
#define OUTCOME_JOIN                                                                               \
    "FROM jsonb_each_text($1::jsonb) e FULL JOIN ("                                                \
    "  SELECT p.event_id, p.status || CASE WHEN p.status = 'settled' THEN '/' || "                 \
    "         coalesce(i.attempt::text, '?') ELSE '' END AS outcome, p.attempts, p.last_error "    \
    "  FROM payments p LEFT JOIN inbox i ON i.event_id = p.event_id) g ON g.event_id = e.key "     \
    "WHERE g.outcome IS DISTINCT FROM e.value"

static long long check_sql(tdb *db, const char *what, const char *sql, const char *detail_sql)
{
    long long n = tdb_long(db, sql, NULL);

    if (!CHECK_INT(n, 0)) {
        char *d = detail_sql ? tdb_value(db, detail_sql, NULL) : NULL;
        fprintf(stderr, "invariant \"%s\" broken: %lld offending; %s\n", what, n, d ? d : "");
        free(d);
    }
    return n;
}

static void db_checks(tf_world *w, tf_result *res)
{
    tdb *db = w->e.db;

    check_sql(db, "one balanced effect per settled event",
              "SELECT count(*) FROM payments p LEFT JOIN ("
              "  SELECT event_id, count(*) AS n, count(*) FILTER (WHERE side = 'debit') AS nd,"
              "         sum(amount_cents) FILTER (WHERE side = 'debit') AS debit,"
              "         sum(amount_cents) FILTER (WHERE side = 'credit') AS credit"
              "  FROM ledger_entries GROUP BY event_id) l ON l.event_id = p.event_id "
              "WHERE p.status = 'settled' AND (l.n IS DISTINCT FROM 2 OR l.nd IS DISTINCT FROM 1 "
              "OR l.debit IS DISTINCT FROM p.amount_cents OR l.credit IS DISTINCT FROM "
              "p.amount_cents)",
              "SELECT string_agg(event_id || ' x' || n, ', ') FROM (SELECT event_id, count(*) n "
              "FROM ledger_entries GROUP BY event_id HAVING count(*) <> 2 LIMIT 10) x");
    check_sql(db, "no effect for an event that is not settled",
              "SELECT count(*) FROM ledger_entries l LEFT JOIN payments p ON p.event_id = "
              "l.event_id WHERE p.status IS DISTINCT FROM 'settled'",
              "SELECT string_agg(DISTINCT l.event_id || '=' || coalesce(p.status, '(none)'), ', ') "
              "FROM ledger_entries l LEFT JOIN payments p ON p.event_id = l.event_id "
              "WHERE p.status IS DISTINCT FROM 'settled'");
    check_sql(db, "the inbox is exactly the settled set",
              "SELECT count(*) FROM inbox i FULL JOIN (SELECT event_id FROM payments WHERE "
              "status = 'settled') s ON s.event_id = i.event_id "
              "WHERE i.event_id IS NULL OR s.event_id IS NULL",
              NULL);
    check_sql(db, "every ledger line of a payment is its own event's",
              "SELECT count(*) FROM ledger_entries l JOIN payments p ON p.event_id = l.event_id "
              "WHERE l.payment_id <> p.payment_id",
              NULL);
    check_sql(db, "the outbox is drained", "SELECT count(*) FROM outbox WHERE state = 'pending'",
              NULL);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM inbox", NULL),
              tdb_long(db, "SELECT count(*) FROM payments WHERE status = 'settled'", NULL));
    res->settled =
        (int)tdb_long(db, "SELECT count(*) FROM payments WHERE status = 'settled'", NULL);
    res->unroutable =
        (int)tdb_long(db, "SELECT count(*) FROM payments WHERE status = 'unroutable'", NULL);
    res->dead =
        (int)tdb_long(db, "SELECT count(*) FROM payments WHERE status = 'dead_lettered'", NULL);
}

static tf_event *find_event(tf_load *l, const char *event_id)
{
    for (int i = 0; event_id != NULL && i < l->n; i++)
        if (strcmp(l->ev[i].event_id, event_id) == 0)
            return &l->ev[i];
    return NULL;
}

/* Settlement and retry queues empty; the DLQ holds every dead-lettered event and nothing else. */
static void queue_checks(tf_world *w, tf_load *l, tf_result *res)
{
    static const char *const drained[] = {"payments.settlement", "payments.retry.200",
                                          "payments.retry.400"};
    tmq *m = tmq_connect(w->e.amqp_url);
    tmq_msg *msgs;
    size_t n = 0;
    int *seen, bad = 0;

    if (!CHECK(m != NULL))
        return;
    for (size_t q = 0; q < 3; q++) {
        long d = tmq_wait_depth(m, drained[q], 0, QUIET_MS);

        tcheck_context("queue %s", drained[q]);
        CHECK_INT(d, 0);
        tcheck_context_clear();
    }
    msgs = tmq_read_all(m, "payments.settlement.dlq", false, &n);
    if (!CHECK(msgs != NULL)) {
        tmq_close(m);
        return;
    }
    res->dlq_messages = (long long)n;
    seen = calloc((size_t)l->n, sizeof *seen);
    if (seen == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        tf_event *e = find_event(l, msgs[i].message_id);

        if (e == NULL || e->kind != TF_ZERO) {
            if (bad++ < MAX_REPORTED)
                FAIL("DLQ holds %s (%s), which is not a dead-lettered payment",
                     msgs[i].message_id ? msgs[i].message_id : "(no message_id)",
                     e ? tf_kind_status(e->kind) : "unknown");
            continue;
        }
        seen[e - l->ev]++;
    }
    for (int i = 0; i < l->n; i++)
        if (l->ev[i].kind == TF_ZERO && l->ev[i].status == 202 && seen[i] == 0 &&
            bad++ < MAX_REPORTED)
            FAIL("%s is dead_lettered but not in the DLQ", l->ev[i].event_id);
    free(seen);
    tmq_msgs_free(msgs, n);
    tmq_close(m); /* the messages go back to the DLQ */
}

static void reconciliation_check(tf_world *w)
{
    char base[64];
    thttp_resp r;

    tf_api_url(w, base, sizeof base);
    if (!CHECK(base[0] != '\0'))
        return;
    /* 503 means "retry" (a pooled connection may meet a database restart on its first use) */
    for (int tries = 1;; tries++) {
        thttp_get(base, "/admin/reconciliation", TAPI_ADMIN_TOKEN, &r);
        if (r.status != 503 || tries == 5)
            break;
        printf("reconciliation: 503, retrying\n");
        thttp_resp_free(&r);
        tproc_sleep_ms(200);
    }
    CHECK_INT(r.status, 200);
    if (!CHECK(json_is_true(json_object_get(r.json, "ok"))))
        fprintf(stderr, "reconciliation: %s\n", r.body);
    else {
        char *by = json_dumps(json_object_get(r.json, "by_status"), JSON_COMPACT | JSON_SORT_KEYS);
        printf("reconciliation ok: %s\n", by != NULL ? by : "");
        free(by);
    }
    thttp_resp_free(&r);
}

bool tf_check_invariants(tf_world *w, tf_load *l, int settle_ms, tf_result *out)
{
    int failures = tcheck_failures();
    long long t0 = tproc_now_ms(), deadline = t0 + settle_ms, mismatched = -1;
    tf_result res = {0};
    char *expected;
    char sql[1024];

    client_checks(l, &res);
    expected = expected_json(l);
    snprintf(sql, sizeof sql, "SELECT count(*) %s", OUTCOME_JOIN);
    for (;;) {
        mismatched = tdb_long(w->e.db, sql, expected, NULL);
        if (mismatched == 0 || tproc_now_ms() >= deadline)
            break;
        tproc_sleep_ms(200);
    }
    printf("%d events, %d accepted (%d replays, %d fresh 202s after a dropped attempt, %d dropped "
           "attempts, %d 503s); all terminal %.1f s after the load ended\n",
           res.events, res.accepted, res.replays, res.fresh_after_drop, res.drops, res.unavailable,
           te2e_elapsed_s(t0));
    if (!CHECK_INT(mismatched, 0)) {
        char detail[1024];
        char *d;

        snprintf(detail, sizeof detail,
                 "SELECT string_agg(k || ': want ' || coalesce(v, '(never accepted)') || ', got ' "
                 "|| coalesce(o, '(no row)') || ' attempts=' || coalesce(a::text, '-') || "
                 "coalesce(' error=' || le, ''), '; ') FROM (SELECT coalesce(e.key, g.event_id) k, "
                 "e.value v, g.outcome o, g.attempts a, g.last_error le %s LIMIT 15) x",
                 OUTCOME_JOIN);
        d = tdb_value(w->e.db, detail, expected, NULL);
        fprintf(stderr, "%lld events did not end as their kind says: %s\n", mismatched,
                d ? d : "?");
        free(d);
    }
    free(expected);
    db_checks(w, &res);
    queue_checks(w, l, &res);
    reconciliation_check(w);
    CHECK_INT(tdb_long(w->e.db, TERMINAL_SQL, NULL), res.accepted);
    printf("settled %d, unroutable %d, dead_lettered %d, DLQ %lld messages\n", res.settled,
           res.unroutable, res.dead, res.dlq_messages);
    if (out != NULL)
        *out = res;
    return tcheck_failures() == failures;
}

void tf_figures(const char *test, int crashes, int events, int faults, int garbage)
{
    printf("FIGURES %s: crashes_injected=%d events_checked=%d faults_survived=%d "
           "garbage_inputs=%d\n",
           test, crashes, events, faults, garbage);
    fflush(stdout);
}

/* ---- raw HTTP ------------------------------------------------------------------------------ */

static int status_of(const char *buf, size_t n)
{
    int major, minor, code;

    if (n < 12)
        return 0;
    if (sscanf(buf, "HTTP/%d.%d %d", &major, &minor, &code) == 3)
        return code;
    return 999; /* an answer that is not HTTP: the caller reports it */
}

int tf_raw(int port, const void *data, size_t len, bool half_close, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    const char *p = data;
    char buf[512];
    size_t got = 0, sent = 0;
    int fd = tsock_connect(port);

    if (fd < 0)
        return -2;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (sent < len) {
        struct pollfd pf = {fd, POLLOUT, 0};
        ssize_t n;
        long long left = deadline - tproc_now_ms();

        if (left <= 0)
            break;
        if (poll(&pf, 1, (int)left) <= 0)
            break;
        n = send(fd, p + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            break; /* reset: the server gave up on us; read what it said */
        sent += (size_t)n;
    }
    if (half_close)
        shutdown(fd, SHUT_WR);
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        long long left = deadline - tproc_now_ms();
        ssize_t n;

        if (left <= 0) {
            close(fd);
            return got > 0 ? status_of(buf, got) : -1;
        }
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            break; /* closed (or reset) */
        got += (size_t)n;
        buf[got] = '\0';
        if (got >= 12 && strstr(buf, "\r\n") != NULL)
            break;
        if (got >= sizeof buf - 1)
            break;
    }
    close(fd);
    buf[got] = '\0';
    return got > 0 ? status_of(buf, got) : 0;
}
