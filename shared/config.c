/* shared/config.c - read and validate the environment (docs/operations.md, "Configuration") */
#include "shared/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <amqp.h>
#include <libpq-fe.h>

#include "shared/amqp/mq.h"
#include "shared/failpoint.h"

#define TOKEN_MIN_LEN 16

static const char *env_str(const char *name)
{
    const char *s = getenv(name);
    return (s != NULL && *s != '\0') ? s : NULL;
}

static bool env_long(FILE *errs, const char *name, long def, long min, long max, long *out)
{
    const char *s = env_str(name);
    char *end;
    long v;

    if (s == NULL) {
        *out = def;
        return true;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        fprintf(errs, "config: %s=\"%s\" is not an integer in %ld..%ld\n", name, s, min, max);
        return false;
    }
    *out = v;
    return true;
}

static bool env_int(FILE *errs, const char *name, int def, int min, int max, int *out)
{
    long v;

    if (!env_long(errs, name, def, min, max, &v))
        return false;
    *out = (int)v;
    return true;
}

bool config_parse_listen(const char *s, listen_addr *out)
{
    const char *colon = strrchr(s, ':');
    struct in_addr a;
    char *end;
    long port;
    size_t hlen;

    if (colon == NULL || colon == s)
        return false;
    hlen = (size_t)(colon - s);
    if (hlen >= sizeof out->host)
        return false;
    memcpy(out->host, s, hlen);
    out->host[hlen] = '\0';
    if (strcmp(out->host, "localhost") == 0)
        strcpy(out->host, "127.0.0.1");
    if (inet_pton(AF_INET, out->host, &a) != 1)
        return false;
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    if (errno != 0 || end == colon + 1 || *end != '\0' || port < 0 || port > 65535)
        return false;
    out->port = (uint16_t)port;
    out->set = true;
    return true;
}

bool config_parse_delays(const char *s, int *out, int *n)
{
    const char *p = s;

    *n = 0;
    while (*p) {
        char *end;
        long v;

        errno = 0;
        v = strtol(p, &end, 10);
        if (errno != 0 || end == p || v < 1 || v > 3600000 || *n == CONFIG_MAX_RETRY_STEPS)
            return false;
        out[(*n)++] = (int)v;
        if (*end == '\0')
            break;
        if (*end != ',' || end[1] == '\0')
            return false;
        p = end + 1;
    }
    return *n > 0;
}

void config_db_target(const char *url, char *buf, size_t len)
{
    PQconninfoOption *opts = PQconninfoParse(url, NULL);
    const char *host = "?", *port = "5432", *db = "?";

    if (opts != NULL) {
        for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
            if (o->val == NULL)
                continue;
            if (strcmp(o->keyword, "host") == 0 || (strcmp(o->keyword, "hostaddr") == 0))
                host = o->val;
            else if (strcmp(o->keyword, "port") == 0)
                port = o->val;
            else if (strcmp(o->keyword, "dbname") == 0)
                db = o->val;
        }
    }
    snprintf(buf, len, "%s:%s/%s", host, port, db);
    PQconninfoFree(opts);
}

static bool check_db_url(FILE *errs, const char *url)
{
    char *why = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &why);

    if (opts == NULL) {
        /* libpq's message names the bad part; it never echoes a password */
        fprintf(errs, "config: DATABASE_URL is not a valid libpq connection string: %s",
                why ? why : "parse error\n");
        PQfreemem(why);
        return false;
    }
    PQconninfoFree(opts);
    return true;
}

/* @urls: one amqp:// URL, or a comma-separated list of them, one per cluster node */
static bool check_amqp_url(FILE *errs, const char *urls)
{
    int n = mq_url_count(urls);

    for (int i = 0; i < n; i++) {
        struct amqp_connection_info info;
        char url[1024];

        /* amqp_parse_url writes into its argument: parse a copy */
        if (!mq_url_at(urls, i, url, sizeof url) || amqp_parse_url(url, &info) != AMQP_STATUS_OK) {
            fprintf(
                errs,
                "config: AMQP_URL: item %d of %d is not an amqp://user:pass@host:port/vhost URL\n",
                i + 1, n);
            return false;
        }
    }
    return true;
}

/* @path (the value of @name) opens for reading and is a regular file. */
static bool check_readable_file(FILE *errs, const char *name, const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    const char *why = NULL;

    if (fd < 0)
        why = strerror(errno);
    else if (fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (fd >= 0)
        close(fd);
    if (why != NULL)
        fprintf(errs, "config: %s=\"%s\" is not a readable file: %s\n", name, path, why);
    return why == NULL;
}

static bool check_token(FILE *errs, const char *name, const char *v, bool required)
{
    if (v == NULL) {
        if (!required)
            return true;
        fprintf(errs, "config: %s is required (at least %d characters)\n", name, TOKEN_MIN_LEN);
        return false;
    }
    if (strlen(v) < TOKEN_MIN_LEN) {
        fprintf(errs, "config: %s is too short: at least %d characters\n", name, TOKEN_MIN_LEN);
        return false;
    }
    return true;
}

/* A server URL in @name: false (after a line on @errs) when missing but @required, or refused
 * by @check. */
static bool env_url(FILE *errs, const char *name, bool required,
                    bool (*check)(FILE *errs, const char *url), const char **out)
{
    *out = env_str(name);
    if (*out == NULL) {
        if (required)
            fprintf(errs, "config: %s is required\n", name);
        return !required;
    }
    return check(errs, *out);
}

/* Where the program connects and listens, and who may call it. */
static int load_endpoints(unsigned need, gw_config *c, FILE *errs)
{
    const char *s;
    int bad = 0;

    bad += !env_url(errs, "DATABASE_URL", need & CONFIG_NEED_DB, check_db_url, &c->database_url);
    bad += !env_url(errs, "AMQP_URL", need & CONFIG_NEED_AMQP, check_amqp_url, &c->amqp_url);
    c->amqp_cacert = env_str("AMQP_CACERT");
    if (c->amqp_cacert != NULL && !check_readable_file(errs, "AMQP_CACERT", c->amqp_cacert))
        bad++;
    bad += !env_int(errs, "AMQP_HEARTBEAT_S", 10, 1, 600, &c->amqp_heartbeat_s);

    s = env_str("API_LISTEN");
    if (!config_parse_listen(s ? s : "127.0.0.1:8080", &c->api_listen)) {
        fprintf(errs, "config: API_LISTEN=\"%s\" is not an IPv4 address:port\n", s);
        bad++;
    }
    s = env_str("METRICS_LISTEN");
    if (s != NULL && !config_parse_listen(s, &c->metrics_listen)) {
        fprintf(errs, "config: METRICS_LISTEN=\"%s\" is not an IPv4 address:port\n", s);
        bad++;
    }

    c->api_token = env_str("API_TOKEN");
    c->admin_token = env_str("ADMIN_TOKEN");
    bad += !check_token(errs, "API_TOKEN", c->api_token, need & CONFIG_NEED_TOKENS);
    bad += !check_token(errs, "ADMIN_TOKEN", c->admin_token, need & CONFIG_NEED_TOKENS);
    if (c->api_token && c->admin_token && strcmp(c->api_token, c->admin_token) == 0) {
        fprintf(errs, "config: API_TOKEN and ADMIN_TOKEN must differ\n");
        bad++;
    }
    return bad;
}

/* How the pipeline behaves: prefetch, retries, queues, limits, retention. */
static int load_tuning(gw_config *c, FILE *errs)
{
    const char *s;
    int bad = 0;
    long prefetch;

    bad += !env_long(errs, "WORKER_PREFETCH", 256, 1, 65535, &prefetch);
    c->worker_prefetch = (int)prefetch;

    s = env_str("RETRY_DELAYS_MS");
    if (!config_parse_delays(s ? s : "1000,5000", c->retry_delays_ms, &c->retry_steps)) {
        fprintf(errs,
                "config: RETRY_DELAYS_MS=\"%s\" is not a list of 1..%d delays in ms "
                "(1..3600000), e.g. 1000,5000\n",
                s, CONFIG_MAX_RETRY_STEPS);
        bad++;
    }

    s = env_str("QUEUE_TYPE");
    if (s == NULL || strcmp(s, "classic") == 0) {
        c->queue_type = QUEUE_CLASSIC;
    } else if (strcmp(s, "quorum") == 0) {
        c->queue_type = QUEUE_QUORUM;
    } else {
        fprintf(errs, "config: QUEUE_TYPE=\"%s\" is neither classic nor quorum\n", s);
        bad++;
    }

    bad += !env_long(errs, "OUTBOX_MAX_BACKLOG", 100000, 1, 1000000000L, &c->outbox_max_backlog);
    bad += !env_int(errs, "SETTLEMENT_DELIVERY_LIMIT", 20, 1, 1000, &c->delivery_limit);
    bad += !env_long(errs, "SETTLEMENT_MAX_LENGTH", CONFIG_SETTLEMENT_MAX_LENGTH, 1, 100000000L,
                     &c->settlement_max_length);
    bad += !env_int(errs, "COMMIT_THREADS", 2, 1, CONFIG_MAX_COMMIT_THREADS, &c->commit_threads);
    bad += !env_int(errs, "OUTBOX_RETENTION_HOURS", 24, 1, 24 * 365, &c->outbox_retention_hours);

    bad += !env_int(errs, "INBOX_RETENTION_DAYS", 30, 1, 3650, &c->inbox_retention_days);
    bad += !env_int(errs, "RELAY_SLO_SECONDS", 60, 1, 86400, &c->relay_slo_seconds);
    bad += !env_int(errs, "REPLAY_RATE", 200, 1, 10000, &c->replay_rate);
    bad += !env_int(errs, "ADMIN_SESSION_IDLE_SECONDS", 900, 60, 86400, &c->admin_session_idle_s);
    bad += !env_int(errs, "RETRY_LOST_AFTER_SECONDS", 300, 1, 86400, &c->retry_lost_after_s);
    for (int i = 0; i < c->retry_steps; i++) {
        if (c->retry_delays_ms[i] >= c->retry_lost_after_s * 1000L) {
            fprintf(errs,
                    "config: RETRY_LOST_AFTER_SECONDS=%d must exceed every RETRY_DELAYS_MS "
                    "step (%d ms): a waiting copy is not lost\n",
                    c->retry_lost_after_s, c->retry_delays_ms[i]);
            bad++;
            break;
        }
    }

    c->bank_sim_rules = env_str("BANK_SIM_RULES");
    c->bank_url = env_str("BANK_URL");
    if (c->bank_url != NULL && strncmp(c->bank_url, "http://", 7) != 0 &&
        strncmp(c->bank_url, "https://", 8) != 0) {
        fprintf(errs, "config: BANK_URL=\"%s\" is not an http:// or https:// URL\n", c->bank_url);
        bad++;
    }
    bad += !env_int(errs, "BANK_TIMEOUT_MS", 2000, 50, 600000, &c->bank_timeout_ms);
    c->bank_token = env_str("BANK_TOKEN");
    return bad;
}

/* What the program says about itself, and the faults a test asks it to inject. */
static int load_diagnostics(gw_config *c, FILE *errs)
{
    const char *s;
    int bad = 0;

    s = env_str("LOG_LEVEL");
    c->log_level = LOG_INFO;
    if (s != NULL && !log_parse_level(s, &c->log_level)) {
        fprintf(errs, "config: LOG_LEVEL=\"%s\" is not debug, info, warn or error\n", s);
        bad++;
    }
    s = env_str("LOG_FORMAT");
    c->log_format = LOG_FORMAT_TEXT;
    if (s != NULL && !log_parse_format(s, &c->log_format)) {
        fprintf(errs, "config: LOG_FORMAT=\"%s\" is neither text nor json\n", s);
        bad++;
    }

    c->failpoints = env_str("GATEWAY_FAILPOINTS");
    if (c->failpoints != NULL) {
        char why[160];

        if (!failpoint_validate(c->failpoints, why, sizeof why)) {
            fprintf(errs, "config: GATEWAY_FAILPOINTS is invalid: %s\n", why);
            bad++;
        }
    }
    return bad;
}

int config_load(unsigned need, gw_config *c, FILE *errs)
{
    memset(c, 0, sizeof *c);
    /* every group runs: one start-up reports every bad variable, not only the first */
    return load_endpoints(need, c, errs) + load_tuning(c, errs) + load_diagnostics(c, errs);
}

const gw_config *config_load_or_exit(unsigned need)
{
    static gw_config config;

    if (config_load(need, &config, stderr) != 0)
        exit(CONFIG_EX_CONFIG);
    return &config;
}
