/* tests/support/tapi.c - the API's environment and the checks every answer shares */
#include "tests/support/tapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

#define LISTEN_WAIT_MS 15000
#define STOP_WAIT_MS   12000

const char *const tapi_config_vars[] = {
    "DATABASE_URL",
    "AMQP_URL",
    "AMQP_CACERT",
    "AMQP_HEARTBEAT_S",
    "API_LISTEN",
    "METRICS_LISTEN",
    "API_TOKEN",
    "ADMIN_TOKEN",
    "WORKER_PREFETCH",
    "RETRY_DELAYS_MS",
    "QUEUE_TYPE",
    "OUTBOX_MAX_BACKLOG",
    "OUTBOX_RETENTION_HOURS",
    "INBOX_RETENTION_DAYS",
    "RELAY_SLO_SECONDS",
    "BANK_SIM_RULES",
    "BANK_URL",
    "BANK_TIMEOUT_MS",
    "BANK_TOKEN",
    "LOG_LEVEL",
    "LOG_FORMAT",
    "GATEWAY_FAILPOINTS",
    "COMMIT_THREADS",
    "SETTLEMENT_MAX_LENGTH",
    "RETRY_LOST_AFTER_SECONDS",
    "SETTLEMENT_DELIVERY_LIMIT",
    NULL,
};

const char *tapi_bin(void)
{
    const char *b = getenv("GW_API_BIN");

    if (b == NULL || *b == '\0') {
        fprintf(stderr, "tapi: GW_API_BIN is not set (meson sets it)\n");
        return NULL;
    }
    return b;
}

int tapi_test_init(tdb **db)
{
    *db = NULL;
    if (tdb_admin_url() == NULL) {
        printf("SKIP: GW_TEST_PG_URL is not set\n");
        return 77;
    }
    if (!CHECK(tapi_bin() != NULL))
        return 1;
    thttp_global_init();
    *db = tdb_create(true);
    return CHECK(*db != NULL) ? 0 : 1;
}

void tapi_test_cleanup(tdb *db)
{
    tdb_drop(db);
    thttp_global_cleanup();
}

int tapi_main(const char *name, tdb **db, tapi *api, const char *label, void (*run)(void))
{
    int rc = tapi_test_init(db);

    if (rc == 77)
        return 77;
    if (rc == 0) {
        if (api != NULL)
            tapi_with(api, label, *db, run);
        else
            run();
        tapi_test_cleanup(*db);
        *db = NULL;
    }
    return tcheck_summary(name);
}

const char *tapi_amqp_url(void)
{
    const char *u = getenv("GW_TEST_AMQP_URL");

    return (u != NULL && *u != '\0') ? u : TAPI_DEFAULT_AMQP_URL;
}

const char **tapi_env(const char *db_url, const char *const *extra)
{
    static char amqp[512];
    static char db[1024];
    size_t n = 0, cap = 64;
    const char **env;

    for (const char *const *e = extra; e != NULL && *e != NULL; e++)
        cap++;
    env = calloc(cap, sizeof *env);
    if (env == NULL)
        abort();
    for (const char *const *v = tapi_config_vars; *v != NULL; v++)
        env[n++] = *v; /* "KEY": removed */
    snprintf(amqp, sizeof amqp, "AMQP_URL=%s", tapi_amqp_url());
    env[n++] = amqp;
    if (db_url != NULL) {
        snprintf(db, sizeof db, "DATABASE_URL=%s", db_url);
        env[n++] = db;
    }
    env[n++] = "API_TOKEN=" TAPI_TOKEN;
    env[n++] = "ADMIN_TOKEN=" TAPI_ADMIN_TOKEN;
    env[n++] = "API_LISTEN=127.0.0.1:0";
    for (const char *const *e = extra; e != NULL && *e != NULL; e++)
        env[n++] = *e;
    env[n] = NULL;
    return env;
}

bool tapi_start(tapi *a, const char *label, const char *db_url, const char *const *extra)
{
    const char *bin = tapi_bin();
    const char **env;

    memset(a, 0, sizeof *a);
    if (bin == NULL)
        return false;
    env = tapi_env(db_url, extra);
    a->proc = tproc_start(bin, env, label);
    free(env);
    if (a->proc == NULL)
        return false;
    a->port = tproc_wait_listening(a->proc, LISTEN_WAIT_MS);
    if (a->port <= 0) {
        tproc_free(a->proc);
        a->proc = NULL;
        return false;
    }
    snprintf(a->url, sizeof a->url, "http://127.0.0.1:%d", a->port);
    a->failures_at_start = tcheck_failures();
    return true;
}

void tapi_with(tapi *a, const char *label, const tdb *db, void (*run)(void))
{
    if (CHECK(tapi_start(a, label, tdb_url(db), NULL))) {
        run();
        tapi_stop(a);
    }
}

int tapi_stop(tapi *a)
{
    int status;

    if (a->proc == NULL)
        return -1;
    status = tproc_stop(a->proc, STOP_WAIT_MS);
    if (!CHECK_INT(status, 0) || tcheck_failures() > a->failures_at_start)
        tproc_print_log_tail(a->proc, 40); /* the program's side of what went wrong */
    tproc_free(a->proc);
    a->proc = NULL;
    return status;
}

char *tapi_payment(const char *event_id, const char *payment_id)
{
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s, s:{s:s, s:s}, s:{s:s, s:s}, s:s}", "event_id", event_id,
        "payment_id", payment_id, "method", "pix", "decision", "approved", "amount_cents",
        (json_int_t)15000, "currency", "BRL", "payee", "bank", "001", "account", "1234-5", "payer",
        "name", "Maria Silva", "document", "12345678909", "decided_at", "2026-11-29T12:00:00Z");
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

    json_decref(o);
    if (s == NULL)
        abort();
    return s;
}

bool tapi_post(const tapi *a, const char *body, const char *const *extra, thttp_resp *out)
{
    return thttp_post_payment(a->url, TAPI_TOKEN, body, extra, out);
}

bool tapi_post_n(const tapi *a, const char *body, size_t len, const char *const *extra,
                 thttp_resp *out)
{
    return thttp_post_payment_n(a->url, TAPI_TOKEN, body, len, extra, out);
}

bool tapi_get(const tapi *a, const char *path, thttp_resp *out)
{
    return thttp_get(a->url, path, TAPI_TOKEN, out);
}

bool tapi_check_problem_at(const char *file, int line, const thttp_resp *r, long status,
                           const char *slug)
{
    char suffix[128];
    const char *ct = thttp_header(r, "Content-Type");
    const char *type = thttp_json_str(r, "type");
    bool ok = true;

    snprintf(suffix, sizeof suffix, "/problems/%s", slug);
    ok &= tcheck_int(file, line, "status", r->status, status);
    ok &= tcheck_str(file, line, "Content-Type", ct, "application/problem+json");
    ok &= tcheck_true(file, line, "body is a JSON object", json_is_object(r->json));
    if (type == NULL || strlen(type) < strlen(suffix) ||
        strcmp(type + strlen(type) - strlen(suffix), suffix) != 0)
        ok &= tcheck_str(file, line, "type (its end)", type, suffix);
    ok &= tcheck_int(file, line, "problem status",
                     json_integer_value(json_object_get(r->json, "status")), status);
    ok &= tcheck_true(file, line, "problem has a title",
                      json_is_string(json_object_get(r->json, "title")));
    ok &= tcheck_true(file, line, "problem has a detail",
                      json_is_string(json_object_get(r->json, "detail")));
    if (!ok)
        fprintf(stderr, "%s:%d:   the body was: %.500s (curl: %s)\n", file, line,
                r->body ? r->body : "", r->error);
    return ok;
}

bool tapi_check_retry_after_at(const char *file, int line, const thttp_resp *r)
{
    const char *v = thttp_header(r, "Retry-After");
    bool ok = v != NULL && *v != '\0' && strspn(v, "0123456789") == strlen(v) && atoi(v) > 0;

    if (!ok)
        tcheck_str(file, line, "Retry-After (want delay-seconds > 0)", v, "N");
    else
        tcheck_true(file, line, "Retry-After", true);
    return ok;
}

double tapi_metric(const char *text, const char *name)
{
    size_t n = strlen(name);

    for (const char *line = text; line != NULL && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, name, n) == 0 && line[n] == ' ')
            return strtod(line + n + 1, NULL);
    }
    return -1;
}

void tapi_check_accepted_at(const char *file, int line, const thttp_resp *r, const char *event_id,
                            const char *payment_id, bool replay)
{
    char location[128];

    tcheck_context("%s:%d: 202 for %s", file, line, event_id);
    snprintf(location, sizeof location, "/v1/payments/%s", payment_id);
    if (!CHECK_INT(r->status, 202))
        fprintf(stderr, "    body: %s (curl: %s)\n", r->body, r->error);
    CHECK_STR(thttp_header(r, "Content-Type"), "application/json");
    CHECK_STR(thttp_header(r, "Location"), location);
    CHECK_STR(thttp_json_str(r, "event_id"), event_id);
    CHECK_STR(thttp_json_str(r, "payment_id"), payment_id);
    CHECK_STR(thttp_json_str(r, "status"), "accepted");
    CHECK_INT(json_object_size(r->json), 3);
    if (replay)
        CHECK_STR(thttp_header(r, "Idempotent-Replayed"), "true");
    else
        CHECK(thttp_header(r, "Idempotent-Replayed") == NULL);
    tcheck_context_clear();
}

void tapi_check_rows_at(const char *file, int line, tdb *db, const char *event_id, long long n)
{
    static const char *const tables[] = {"payments", "outbox", "idempotency_keys"};
    char sql[128];

    /* the payment row is the idempotency record (sql/0018): an accept writes no other */
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        tcheck_context("%s:%d: %s rows of %s", file, line, tables[i], event_id);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE event_id = $1", tables[i]);
        CHECK_INT(tdb_long(db, sql, event_id, NULL), i < 2 ? n : 0);
    }
    tcheck_context_clear();
}
