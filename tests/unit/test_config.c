/* tests/unit/test_config.c - config_load() against docs/operations.md, "Configuration" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shared/amqp/mq.h"
#include "shared/config.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"

#define API_TOKEN   "api-token-0123456789abcdef"
#define ADMIN_TOKEN "admin-token-0123456789abcdef"

#define ALL (CONFIG_NEED_DB | CONFIG_NEED_AMQP | CONFIG_NEED_TOKENS)

/* A valid environment for every program: the required variables only. */
static void reset_env(void)
{
    for (const char *const *v = tapi_config_vars; *v != NULL; v++)
        unsetenv(*v);
    setenv("DATABASE_URL", "postgresql://paygw:hunter2@db.example:5432/paygw", 1);
    setenv("AMQP_URL", "amqp://guest:rabbit-secret@mq.example:5672/%2f", 1);
    setenv("API_TOKEN", API_TOKEN, 1);
    setenv("ADMIN_TOKEN", ADMIN_TOKEN, 1);
}

/* config_load(@need) into @c; the error text in @errs (size @len). Returns the bad count. */
static int load(unsigned need, gw_config *c, char *errs, size_t len)
{
    FILE *f = fmemopen(errs, len, "w");
    int bad;

    if (f == NULL)
        abort();
    memset(errs, 0, len);
    bad = config_load(need, c, f);
    fclose(f);
    return bad;
}

static int count_lines(const char *s)
{
    int n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_defaults(void)
{
    gw_config c;
    char errs[2048];

    reset_env();
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 0);
    CHECK_STR(errs, "");
    CHECK_STR(c.database_url, "postgresql://paygw:hunter2@db.example:5432/paygw");
    CHECK_STR(c.amqp_url, "amqp://guest:rabbit-secret@mq.example:5672/%2f");
    CHECK_STR(c.api_token, API_TOKEN);
    CHECK_STR(c.admin_token, ADMIN_TOKEN);
    CHECK(c.api_listen.set);
    CHECK_STR(c.api_listen.host, "127.0.0.1");
    CHECK_INT(c.api_listen.port, 8080);
    CHECK(!c.metrics_listen.set); /* off unless set */
    CHECK_INT(c.worker_prefetch, 256);
    CHECK_INT(c.retry_steps, 2);
    CHECK_INT(c.retry_delays_ms[0], 1000);
    CHECK_INT(c.retry_delays_ms[1], 5000);
    CHECK_INT(c.queue_type, QUEUE_CLASSIC);
    CHECK_INT(c.outbox_max_backlog, 100000);
    CHECK_INT(c.commit_threads, 2);
    CHECK(c.amqp_cacert == NULL); /* the system's CA bundle */
    CHECK_INT(c.outbox_retention_hours, 24);
    CHECK_INT(c.amqp_heartbeat_s, 10);
    CHECK_INT(c.inbox_retention_days, 30);
    CHECK_INT(c.relay_slo_seconds, 60);
    CHECK(c.bank_sim_rules == NULL);
    CHECK_INT(c.log_level, LOG_INFO);
    CHECK_INT(c.log_format, LOG_FORMAT_TEXT);
    CHECK(c.failpoints == NULL);
}

/* A value for every variable but AMQP_CACERT (a file made by the test). */
static const char *const every_var[][2] = {
    {"COMMIT_THREADS", "3"},
    {"API_LISTEN", "0.0.0.0:9000"},
    {"METRICS_LISTEN", "127.0.0.1:9100"},
    {"WORKER_PREFETCH", "5"},
    {"RETRY_DELAYS_MS", "100,200,300"},
    {"QUEUE_TYPE", "quorum"},
    {"OUTBOX_MAX_BACKLOG", "3"},
    {"OUTBOX_RETENTION_HOURS", "48"},
    {"AMQP_HEARTBEAT_S", "4"},
    {"BANK_SIM_RULES", "001/*:down"},
    {"LOG_LEVEL", "debug"},
    {"LOG_FORMAT", "json"},
    {"GATEWAY_FAILPOINTS", "api.before_commit=error"},
};

static void test_values_are_read(void)
{
    gw_config c;
    char errs[2048];
    char ca[] = "/tmp/test_config_ca_XXXXXX"; /* any readable regular file */
    int fd = mkstemp(ca);

    if (!CHECK(fd >= 0))
        return;
    close(fd);
    reset_env();
    setenv("AMQP_CACERT", ca, 1);
    for (size_t i = 0; i < sizeof every_var / sizeof every_var[0]; i++)
        setenv(every_var[i][0], every_var[i][1], 1);
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 0);
    CHECK_STR(errs, "");
    CHECK_STR(c.api_listen.host, "0.0.0.0");
    CHECK_INT(c.api_listen.port, 9000);
    CHECK(c.metrics_listen.set);
    CHECK_INT(c.metrics_listen.port, 9100);
    CHECK_INT(c.worker_prefetch, 5);
    CHECK_INT(c.retry_steps, 3);
    CHECK_INT(c.retry_delays_ms[2], 300);
    CHECK_INT(c.queue_type, QUEUE_QUORUM);
    CHECK_INT(c.outbox_max_backlog, 3);
    CHECK_INT(c.outbox_retention_hours, 48);
    CHECK_INT(c.amqp_heartbeat_s, 4);
    CHECK_STR(c.bank_sim_rules, "001/*:down");
    CHECK_INT(c.log_level, LOG_DEBUG);
    CHECK_INT(c.log_format, LOG_FORMAT_JSON);
    CHECK_STR(c.failpoints, "api.before_commit=error");
    CHECK_STR(c.amqp_cacert, ca);
    CHECK_INT(c.commit_threads, 3);
    unlink(ca);

    /* an empty variable is the same as an unset one */
    reset_env();
    setenv("OUTBOX_MAX_BACKLOG", "", 1);
    setenv("LOG_LEVEL", "", 1);
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 0);
    CHECK_INT(c.outbox_max_backlog, 100000);
    CHECK_INT(c.settlement_max_length, CONFIG_SETTLEMENT_MAX_LENGTH);
    CHECK_INT(c.retry_lost_after_s, 300);

    /* a cluster: one URL per node, each checked, handed on as one list */
    reset_env();
    setenv("AMQP_URL", "amqp://g:g@127.0.0.1:5672/%2f,amqp://g:g@127.0.0.1:5673/%2f", 1);
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 0);
    CHECK_INT(mq_url_count(c.amqp_url), 2);
    {
        char url[64];

        CHECK(mq_url_at(c.amqp_url, 1, url, sizeof url));
        CHECK_STR(url, "amqp://g:g@127.0.0.1:5673/%2f");
        CHECK(!mq_url_at(c.amqp_url, 2, url, sizeof url));
        CHECK(!mq_url_at(c.amqp_url, 0, url, 8)); /* too long for the buffer */
    }
}

/* One bad variable: exactly one line, naming it, never echoing @secret. */
static void expect_bad(const char *var, const char *value, const char *named, const char *secret)
{
    gw_config c;
    char errs[2048];

    tcheck_context("%s=\"%s\"", var, value ? value : "(unset)");
    reset_env();
    if (value != NULL)
        setenv(var, value, 1);
    else
        unsetenv(var);
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 1);
    CHECK_INT(count_lines(errs), 1);
    CHECK(strncmp(errs, "config: ", 8) == 0);
    CHECK_CONTAINS(errs, named);
    if (secret != NULL)
        CHECK_NOT_CONTAINS(errs, secret);
    tcheck_context_clear();
}

static void test_each_bad_variable_is_named(void)
{
    expect_bad("DATABASE_URL", NULL, "DATABASE_URL", NULL);
    expect_bad("DATABASE_URL", "postgresql://u:hunter2@h:5432/db?nosuchoption=1", "DATABASE_URL",
               "hunter2");
    expect_bad("DATABASE_URL", "host=x port", "DATABASE_URL", NULL);
    expect_bad("AMQP_URL", NULL, "AMQP_URL", NULL);
    expect_bad("AMQP_URL", "http://guest:rabbit-secret@h/", "AMQP_URL", "rabbit-secret");
    expect_bad("AMQP_URL", "amqp://g:g@h1:5672/%2f,http://guest:rabbit-secret@h2/", "item 2 of 2",
               "rabbit-secret");
    expect_bad("AMQP_URL", "amqp://g:g@h1:5672/%2f,", "AMQP_URL", NULL);
    expect_bad("SETTLEMENT_MAX_LENGTH", "0", "SETTLEMENT_MAX_LENGTH", NULL);
    expect_bad("SETTLEMENT_DELIVERY_LIMIT", "0", "SETTLEMENT_DELIVERY_LIMIT", NULL);
    expect_bad("RETRY_LOST_AFTER_SECONDS", "5", "RETRY_LOST_AFTER_SECONDS", NULL);
    expect_bad("API_TOKEN", NULL, "API_TOKEN", NULL);
    expect_bad("ADMIN_TOKEN", NULL, "ADMIN_TOKEN", NULL);
    expect_bad("API_LISTEN", "nonsense", "API_LISTEN", NULL);
    expect_bad("METRICS_LISTEN", "127.0.0.1:99999", "METRICS_LISTEN", NULL);
    expect_bad("WORKER_PREFETCH", "0", "WORKER_PREFETCH", NULL);
    expect_bad("WORKER_PREFETCH", "ten", "WORKER_PREFETCH", NULL);
    expect_bad("RETRY_DELAYS_MS", "1000,,5000", "RETRY_DELAYS_MS", NULL);
    expect_bad("QUEUE_TYPE", "stream", "QUEUE_TYPE", NULL);
    expect_bad("OUTBOX_MAX_BACKLOG", "abc", "OUTBOX_MAX_BACKLOG", NULL);
    expect_bad("OUTBOX_MAX_BACKLOG", "0", "OUTBOX_MAX_BACKLOG", NULL);
    expect_bad("OUTBOX_MAX_BACKLOG", "-5", "OUTBOX_MAX_BACKLOG", NULL);
    expect_bad("OUTBOX_MAX_BACKLOG", "10x", "OUTBOX_MAX_BACKLOG", NULL);
    expect_bad("OUTBOX_MAX_BACKLOG", "99999999999999999999999", "OUTBOX_MAX_BACKLOG", NULL);
    expect_bad("OUTBOX_RETENTION_HOURS", "0", "OUTBOX_RETENTION_HOURS", NULL);
    expect_bad("AMQP_HEARTBEAT_S", "0", "AMQP_HEARTBEAT_S", NULL);
    expect_bad("AMQP_HEARTBEAT_S", "601", "AMQP_HEARTBEAT_S", NULL);
    expect_bad("INBOX_RETENTION_DAYS", "0", "INBOX_RETENTION_DAYS", NULL);
    expect_bad("RELAY_SLO_SECONDS", "soon", "RELAY_SLO_SECONDS", NULL);
    expect_bad("LOG_LEVEL", "loud", "LOG_LEVEL", NULL);
    expect_bad("LOG_LEVEL", "INFO", "LOG_LEVEL", NULL);
    expect_bad("LOG_FORMAT", "xml", "LOG_FORMAT", NULL);
    expect_bad("GATEWAY_FAILPOINTS", "api.before_commit=explode", "GATEWAY_FAILPOINTS", NULL);
    expect_bad("AMQP_CACERT", "/nonexistent/ca.pem", "AMQP_CACERT", NULL);
    expect_bad("AMQP_CACERT", "/", "AMQP_CACERT", NULL); /* a folder is not a PEM file */
    expect_bad("COMMIT_THREADS", "0", "COMMIT_THREADS", NULL);
    expect_bad("COMMIT_THREADS", "9", "COMMIT_THREADS", NULL);
    expect_bad("COMMIT_THREADS", "two", "COMMIT_THREADS", NULL);
}

static void test_tokens(void)
{
    gw_config c;
    char errs[2048];

    /* 15 characters is too short, 16 is enough */
    expect_bad("API_TOKEN", "short-secret-15", "API_TOKEN", "short-secret-15");
    expect_bad("ADMIN_TOKEN", "short-secret-15", "ADMIN_TOKEN", "short-secret-15");
    reset_env();
    setenv("API_TOKEN", "sixteen-chars-ok", 1);
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 0);

    /* equal tokens would let one open both prefixes */
    reset_env();
    setenv("ADMIN_TOKEN", API_TOKEN, 1);
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 1);
    CHECK_INT(count_lines(errs), 1);
    CHECK_CONTAINS(errs, "API_TOKEN");
    CHECK_CONTAINS(errs, "ADMIN_TOKEN");
    CHECK_NOT_CONTAINS(errs, API_TOKEN);

    /* a program that needs no tokens starts without them */
    reset_env();
    unsetenv("API_TOKEN");
    unsetenv("ADMIN_TOKEN");
    CHECK_INT(load(CONFIG_NEED_DB | CONFIG_NEED_AMQP, &c, errs, sizeof errs), 0);
    CHECK(c.api_token == NULL);
}

static void test_needs(void)
{
    gw_config c;
    char errs[2048];

    reset_env();
    unsetenv("DATABASE_URL");
    unsetenv("AMQP_URL");
    CHECK_INT(load(CONFIG_NEED_TOKENS, &c, errs, sizeof errs), 0);
    CHECK(c.database_url == NULL);
    CHECK(c.amqp_url == NULL);
}

static void test_every_bad_variable_at_once(void)
{
    gw_config c;
    char errs[4096];

    reset_env();
    unsetenv("DATABASE_URL");
    unsetenv("API_TOKEN");
    setenv("ADMIN_TOKEN", "tiny-secret", 1);
    setenv("API_LISTEN", "nonsense", 1);
    setenv("LOG_LEVEL", "loud", 1);
    setenv("OUTBOX_MAX_BACKLOG", "abc", 1);
    setenv("RETRY_DELAYS_MS", "0", 1);
    CHECK_INT(load(ALL, &c, errs, sizeof errs), 7);
    CHECK_INT(count_lines(errs), 7);
    CHECK_CONTAINS(errs, "DATABASE_URL");
    CHECK_CONTAINS(errs, "API_TOKEN");
    CHECK_CONTAINS(errs, "ADMIN_TOKEN");
    CHECK_CONTAINS(errs, "API_LISTEN");
    CHECK_CONTAINS(errs, "LOG_LEVEL");
    CHECK_CONTAINS(errs, "OUTBOX_MAX_BACKLOG");
    CHECK_CONTAINS(errs, "RETRY_DELAYS_MS");
    CHECK_NOT_CONTAINS(errs, "tiny-secret");
}

static void expect_delays(const char *s, int n, const int *want)
{
    int got[CONFIG_MAX_RETRY_STEPS + 1] = {0};
    int count = -1;
    bool ok = config_parse_delays(s, got, &count);

    tcheck_context("RETRY_DELAYS_MS=\"%s\"", s);
    if (n < 0) {
        CHECK(!ok);
    } else if (CHECK(ok) && CHECK_INT(count, n)) {
        for (int i = 0; i < n; i++)
            CHECK_INT(got[i], want[i]);
    }
    tcheck_context_clear();
}

static void test_retry_delays(void)
{
    static const int d1[] = {1000, 5000}, d2[] = {250}, d3[] = {1, 3600000},
                     d8[] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const char *const bad[] = {
        "1,2,3,4,5,6,7,8,9", /* more steps than CONFIG_MAX_RETRY_STEPS */
        "",
        "0",
        "3600001",
        "-1000",
        "1000,",
        ",1000",
        "1000,,5000",
        "1000;5000",
        "1000 ,5000",
        "1s,5s",
        "abc",
        "99999999999999999999"};

    expect_delays("1000,5000", 2, d1);
    expect_delays("250", 1, d2);
    expect_delays("1,3600000", 2, d3);
    expect_delays("1,2,3,4,5,6,7,8", 8, d8);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_delays(bad[i], -1, NULL);
}

static void expect_listen(const char *s, const char *host, int port)
{
    listen_addr a;
    bool ok;

    memset(&a, 0, sizeof a);
    ok = config_parse_listen(s, &a);
    tcheck_context("listen \"%s\"", s);
    if (host == NULL) {
        CHECK(!ok);
    } else if (CHECK(ok)) {
        CHECK(a.set);
        CHECK_STR(a.host, host);
        CHECK_INT(a.port, port);
    }
    tcheck_context_clear();
}

static void test_listen(void)
{
    expect_listen("127.0.0.1:8080", "127.0.0.1", 8080);
    expect_listen("127.0.0.1:0", "127.0.0.1", 0); /* the kernel picks */
    expect_listen("0.0.0.0:65535", "0.0.0.0", 65535);
    expect_listen("localhost:80", "127.0.0.1", 80);
    expect_listen("10.1.2.3:1", "10.1.2.3", 1);
    expect_listen("nonsense", NULL, 0);
    expect_listen("", NULL, 0);
    expect_listen(":8080", NULL, 0);
    expect_listen("127.0.0.1", NULL, 0);
    expect_listen("127.0.0.1:", NULL, 0);
    expect_listen("127.0.0.1:65536", NULL, 0);
    expect_listen("127.0.0.1:-1", NULL, 0);
    expect_listen("127.0.0.1:80x", NULL, 0);
    expect_listen("256.0.0.1:80", NULL, 0);
    expect_listen("example.com:80", NULL, 0);
    expect_listen("[::1]:80", NULL, 0);
}

static void test_db_target_hides_credentials(void)
{
    char buf[160];

    config_db_target("postgresql://paygw:hunter2@db.example:6432/payments", buf, sizeof buf);
    CHECK_STR(buf, "db.example:6432/payments");
    config_db_target("host=db2 port=5433 dbname=x user=u password=hunter2", buf, sizeof buf);
    CHECK_STR(buf, "db2:5433/x");
}

int main(void)
{
    TRUN(test_defaults);
    TRUN(test_values_are_read);
    TRUN(test_each_bad_variable_is_named);
    TRUN(test_tokens);
    TRUN(test_needs);
    TRUN(test_every_bad_variable_at_once);
    TRUN(test_retry_delays);
    TRUN(test_listen);
    TRUN(test_db_target_hides_credentials);
    return tcheck_summary("test_config");
}
