/* tests/e2e/te2e.c - database + vhost per test, the relay and the worker as child processes */
#include "tests/e2e/te2e.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/tapi.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

#define READY_WAIT_MS    20000
#define STOP_WAIT_MS     12000
#define SETUP_TRIES      5
#define SETUP_RETRY_MS   2000
#define PUBLISH_BATCH    500 /* publishes between two waits for their confirms */
#define CONFIRMS_WAIT_MS 10000

/* The body te2e_seed() writes in SQL and te2e_body() in C: byte for byte the same. */
#define BODY_FMT                                                                                   \
    "{\"event_id\":\"%s\",\"payment_id\":\"%s\",\"method\":\"pix\",\"decision\":\"approved\","     \
    "\"amount_cents\":%lld,\"currency\":\"BRL\",\"payee\":{\"bank\":\"%s\",\"account\":\"%s\"}}"

static const char *prog_bin(tprog_kind kind)
{
    const char *var = kind == TPROG_RELAY ? "GW_RELAY_BIN" : "GW_WORKER_BIN";
    const char *b = getenv(var);

    if (b == NULL || *b == '\0') {
        fprintf(stderr, "te2e: %s is not set (meson sets it)\n", var);
        return NULL;
    }
    return b;
}

int te2e_init(te2e *e, const char *name)
{
    memset(e, 0, sizeof *e);
    e->name = name;
    if (tdb_admin_url() == NULL) {
        printf("SKIP: GW_TEST_PG_URL is not set\n");
        return 77;
    }
    if (tstack_bin() == NULL) {
        printf("SKIP: GW_STACK is not set (each test makes its own vhost with it)\n");
        return 77;
    }
    if (prog_bin(TPROG_RELAY) == NULL || prog_bin(TPROG_WORKER) == NULL || tapi_bin() == NULL)
        return 1;
    thttp_global_init();
    /* a few tries: a test that restarts the shared servers may be doing it right now */
    for (int i = 0; i < SETUP_TRIES && e->db == NULL; i++) {
        if (i > 0)
            tproc_sleep_ms(SETUP_RETRY_MS);
        e->db = tdb_create(true);
    }
    if (e->db == NULL)
        return 1;
    snprintf(e->vhost, sizeof e->vhost, "e2e-%s-%d", name, (int)getpid());
    for (int i = 0; i < SETUP_TRIES && e->amqp_url == NULL; i++) {
        if (i > 0)
            tproc_sleep_ms(SETUP_RETRY_MS);
        e->amqp_url = tstack_vhost_create(e->vhost);
    }
    if (e->amqp_url == NULL) {
        e->vhost[0] = '\0';
        return 1;
    }
    return 0;
}

struct plain_run {
    void (*run)(void);
};

static void plain_run(void *arg)
{
    const struct plain_run *p = arg;

    p->run();
}

int te2e_main(const char *name, te2e *e, void (*run)(void))
{
    struct plain_run p = {run};

    return te2e_main_arg(name, e, plain_run, &p);
}

int te2e_main_arg(const char *name, te2e *e, void (*run)(void *arg), void *arg)
{
    char summary[128];
    int rc = te2e_init(e, name);

    if (rc == 0)
        run(arg);
    else if (rc != 77)
        FAIL("the fixture could not be set up");
    te2e_cleanup(e);
    snprintf(summary, sizeof summary, "test_%s", name);
    return rc == 77 ? 77 : tcheck_summary(summary);
}

void te2e_cleanup(te2e *e)
{
    if (e->vhost[0] != '\0')
        tstack_vhost_delete(e->vhost);
    e->vhost[0] = '\0';
    free(e->amqp_url);
    e->amqp_url = NULL;
    tdb_drop(e->db);
    e->db = NULL;
    thttp_global_cleanup();
}

static bool spawn(tprog *p, tprog_kind kind, const char *label, const te2e *e,
                  const char *const *extra)
{
    const char *bin = prog_bin(kind);
    char db[1024], amqp[600];
    const char *env[64];
    size_t n = 0;

    memset(p, 0, sizeof *p);
    if (bin == NULL)
        return false;
    for (const char *const *v = tapi_config_vars; *v != NULL; v++)
        env[n++] = *v; /* "KEY": removed */
    snprintf(db, sizeof db, "DATABASE_URL=%s", tdb_url(e->db));
    snprintf(amqp, sizeof amqp, "AMQP_URL=%s", e->amqp_url);
    env[n++] = db;
    env[n++] = amqp;
    env[n++] = "METRICS_LISTEN=127.0.0.1:0";
    for (const char *const *x = extra; x != NULL && *x != NULL && n < 63; x++)
        env[n++] = *x;
    env[n] = NULL;
    p->proc = tproc_start(bin, env, label);
    p->failures_at_start = tcheck_failures();
    return p->proc != NULL;
}

bool te2e_wait_ready(tproc *p, const char *base, const char *label)
{
    long long deadline = tproc_now_ms() + READY_WAIT_MS;

    for (;;) {
        thttp_resp r;
        long status;

        thttp_get(base, "/readyz", NULL, &r);
        status = r.status;
        thttp_resp_free(&r);
        if (status == 200)
            return true;
        if (!tproc_running(p) || tproc_now_ms() >= deadline) {
            fprintf(stderr, "te2e: %s not ready (last /readyz %ld)\n", label, status);
            tproc_print_log_tail(p, 30);
            return false;
        }
        tproc_sleep_ms(25);
    }
}

bool tprog_start(tprog *p, tprog_kind kind, const char *label, const te2e *e,
                 const char *const *extra)
{
    if (!spawn(p, kind, label, e, extra))
        return false;
    p->port = tproc_wait_listening(p->proc, READY_WAIT_MS);
    if (p->port <= 0)
        goto fail;
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->port);
    if (!te2e_wait_ready(p->proc, p->url, label))
        goto fail;
    p->failures_at_start = tcheck_failures();
    return true;
fail:
    tproc_free(p->proc);
    p->proc = NULL;
    return false;
}

int tprog_stop(tprog *p, int within_ms)
{
    long long t0 = tproc_now_ms();
    int status;
    long long took;

    if (p->proc == NULL)
        return -1;
    status = tproc_stop(p->proc, STOP_WAIT_MS);
    took = tproc_now_ms() - t0;
    tcheck_context("exit status of pid %d after SIGTERM", (int)tproc_pid(p->proc));
    CHECK_INT(status, 0);
    tcheck_context_clear();
    if (within_ms > 0 && took > within_ms)
        FAIL("pid %d took %lld ms to stop after SIGTERM (want <= %d)", (int)tproc_pid(p->proc),
             took, within_ms);
    if (tcheck_failures() > p->failures_at_start)
        tproc_print_log_tail(p->proc, 40);
    tproc_free(p->proc);
    p->proc = NULL;
    return status;
}

void tprog_free(tprog *p)
{
    tproc_free(p->proc);
    p->proc = NULL;
}

double tprog_metric(const tprog *p, const char *name)
{
    thttp_resp r;
    double v = -1;

    if (p->port <= 0)
        return -1;
    if (thttp_get(p->url, "/metrics", NULL, &r) && r.status == 200)
        v = tapi_metric(r.body, name);
    thttp_resp_free(&r);
    return v;
}

double tprog_sum(tprog *ps, int n, const char *name)
{
    double sum = 0;

    for (int i = 0; i < n; i++) {
        double v = ps[i].proc != NULL ? tprog_metric(&ps[i], name) : -1;
        if (v > 0)
            sum += v;
    }
    return sum;
}

long long te2e_wait_long(tdb *db, const char *sql, long long want, int timeout_ms, int every_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    long long v;

    for (;;) {
        v = tdb_long(db, sql, NULL);
        if (v == want || tproc_now_ms() >= deadline)
            return v;
        tproc_sleep_ms(every_ms);
    }
}

bool te2e_check_balanced_at(const char *file, int line, tdb *db)
{
    return tcheck_int(
        file, line, "ledger debits - credits",
        tdb_long(db,
                 "SELECT sum(amount_cents) FILTER (WHERE side = 'debit') - "
                 "sum(amount_cents) FILTER (WHERE side = 'credit') FROM ledger_entries",
                 NULL),
        0);
}

bool te2e_check_wait_at(const char *file, int line, tdb *db, const char *sql, long long want,
                        int timeout_ms, int every_ms)
{
    return tcheck_int(file, line, sql, te2e_wait_long(db, sql, want, timeout_ms, every_ms), want);
}

double te2e_wait_metric(tprog *ps, int n, const char *name, double want, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    double v;

    for (;;) {
        v = tprog_sum(ps, n, name);
        if (v >= want || tproc_now_ms() >= deadline)
            return v;
        tproc_sleep_ms(50);
    }
}

void te2e_event_id(char *buf, size_t len, const char *prefix, int i)
{
    snprintf(buf, len, "%s-e%d", prefix, i);
}

void te2e_payment_id(char *buf, size_t len, const char *prefix, int i)
{
    snprintf(buf, len, "%s-p%d", prefix, i);
}

bool te2e_seed(tdb *db, const char *prefix, int n, bool outbox)
{
    char count[16];
    bool ok;

    snprintf(count, sizeof count, "%d", n);
    ok = tdb_exec(
        db,
        "WITH s AS (SELECT g, $1 || '-e' || g AS e, $1 || '-p' || g AS p "
        "           FROM generate_series(1, $2::int) g), "
        "pay AS (INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, "
        "                              currency, payee_bank, payee_account, status) "
        "        SELECT p, e, 'pix', 'approved', 100 + g, 'BRL', '001', '1234-5', "
        "               CASE WHEN $3::bool THEN 'accepted' ELSE 'published' END FROM s) "
        "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
        "SELECT e, p, 'payment.pix.approved', "
        "       format('{\"event_id\":\"%s\",\"payment_id\":\"%s\",\"method\":\"pix\","
        "\"decision\":\"approved\",\"amount_cents\":%s,\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"}}', e, p, 100 + g) "
        "FROM s WHERE $3::bool",
        prefix, count, outbox ? "true" : "false", NULL);
    if (ok && outbox)
        ok = tdb_exec(db, "SELECT pg_notify('paygw_outbox', '')", NULL);
    return ok;
}

char *te2e_payment_json(const char *event_id, const char *payment_id, long long amount,
                        const char *bank, const char *account)
{
    size_t len = strlen(BODY_FMT) + strlen(event_id) + strlen(payment_id) + strlen(bank) +
                 strlen(account) + 32;
    char *s = malloc(len);

    if (s == NULL)
        abort();
    snprintf(s, len, BODY_FMT, event_id, payment_id, amount, bank, account);
    return s;
}

char *te2e_body(const char *prefix, int i)
{
    char e[96], p[96];

    te2e_event_id(e, sizeof e, prefix, i);
    te2e_payment_id(p, sizeof p, prefix, i);
    return te2e_payment_json(e, p, 100 + i, "001", "1234-5");
}

bool te2e_insert_payment(tdb *db, const char *event_id, const char *payment_id, long long amount,
                         const char *bank, const char *account)
{
    char a[32];

    snprintf(a, sizeof a, "%lld", amount);
    return tdb_exec(db,
                    "INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, "
                    "currency, payee_bank, payee_account, status) "
                    "VALUES ($1, $2, 'pix', 'approved', $3::bigint, 'BRL', $4, $5, 'published')",
                    payment_id, event_id, a, bank, account, NULL);
}

/* Event @event_id with @body as the relay publishes it. */
static tmq_pub relay_pub(const char *event_id, const char *body)
{
    tmq_pub p = {
        .exchange = "payments.events",
        .routing_key = "payment.pix.approved",
        .body = body,
        .message_id = event_id,
        .attempt = 1,
        .mandatory = true,
    };

    return p;
}

bool te2e_publish_event(tmq *m, const char *event_id, const char *body)
{
    return te2e_publish_attempt(m, event_id, body, 1);
}

bool te2e_publish_attempt(tmq *m, const char *event_id, const char *body, int attempt)
{
    tmq_pub p = relay_pub(event_id, body);

    p.attempt = attempt;
    return tmq_publish(m, &p) == 1;
}

bool te2e_publish_events(tmq *m, const char *prefix, int n, int dup_every)
{
    bool ok = true;

    for (int i = 1; i <= n && ok; i++) {
        char id[64];
        char *body = te2e_body(prefix, i);
        tmq_pub p;

        te2e_event_id(id, sizeof id, prefix, i);
        p = relay_pub(id, body);
        ok = tmq_publish_nowait(m, &p);
        if (ok && dup_every > 0 && i % dup_every == 0)
            ok = tmq_publish_nowait(m, &p); /* the duplicate, right behind */
        free(body);
        if (ok && i % PUBLISH_BATCH == 0)
            ok = tmq_wait_confirms(m, CONFIRMS_WAIT_MS);
    }
    return ok && tmq_wait_confirms(m, CONFIRMS_WAIT_MS);
}

int *te2e_event_counts(const tmq_msg *msgs, size_t nmsgs, const char *prefix, int n)
{
    int *counts = calloc((size_t)n + 1, sizeof *counts);
    size_t plen = strlen(prefix);

    if (counts == NULL)
        abort();
    for (size_t i = 0; i < nmsgs; i++) {
        const char *id = msgs[i].message_id;
        char *end = NULL;
        long k = -1;

        if (id != NULL && strncmp(id, prefix, plen) == 0 && strncmp(id + plen, "-e", 2) == 0)
            k = strtol(id + plen + 2, &end, 10);
        if (k >= 1 && k <= n && *end == '\0')
            counts[k]++;
        else
            counts[0]++;
    }
    return counts;
}

unsigned char *te2e_event_set(tdb *db, const char *sql, int n, long long *count)
{
    unsigned char *set = calloc((size_t)n + 1, 1);
    char *ids;

    if (set == NULL)
        abort();
    *count = 0;
    ids = tdb_value(db, sql, NULL);
    for (char *s = ids; s != NULL && *s != '\0';) {
        long k = strtol(s, &s, 10);

        if (k >= 1 && k <= n) {
            set[k] = 1;
            (*count)++;
        }
        if (*s != ',')
            break;
        s++;
    }
    free(ids);
    return set;
}

double te2e_elapsed_s(long long t0_ms)
{
    return (double)(tproc_now_ms() - t0_ms) / 1000.0;
}
