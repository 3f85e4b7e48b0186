/*
 * tests/integration/test_config_exit.c - payments-api refuses to start half-configured
 *
 * Bad configuration: exit 78 with one "config: VAR ..." line per bad variable
 * and no secret on stderr. A database the build's migrations were not applied
 * to: exit 1 with schema_missing or schema_mismatch.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/tproc.h"

#define RUN_MS 20000

#define SECRET_API_TOKEN "sekrit-api-token-for-config-test"

static tdb *db;

/* Lines of @s that start with "config: " and contain @var, and all lines. */
static int lines_naming(const char *s, const char *var, int *all)
{
    int n = 0;

    *all = 0;
    for (const char *line = s; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];

        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        (*all)++;
        if (strncmp(buf, "config: ", 8) == 0 && strstr(buf, var) != NULL)
            n++;
        line += len + (end ? 1 : 0);
    }
    return n;
}

/* Run the API with @env (tapi_env() of @db_url and @extra); the exit status and stderr. */
static int run_api(const char *db_url, const char *const *extra, char **err)
{
    const char **env = tapi_env(db_url, extra);
    int status = tproc_run(tapi_bin(), env, RUN_MS, err);

    free(env);
    return status;
}

static void test_every_bad_variable(void)
{
    static const char *const bad[] = {
        "API_TOKEN",                 /* removed */
        "ADMIN_TOKEN=short-secret1", /* 13 characters */
        "API_LISTEN=nonsense",
        "LOG_LEVEL=loud",
        "OUTBOX_MAX_BACKLOG=abc",
        NULL,
    };
    static const char *const named[] = {"DATABASE_URL", "API_TOKEN", "ADMIN_TOKEN",
                                        "API_LISTEN",   "LOG_LEVEL", "OUTBOX_MAX_BACKLOG"};
    char *err = NULL;
    int status, all = 0;

    status = run_api(NULL, bad, &err); /* and no DATABASE_URL */
    CHECK_INT(status, 78);
    for (size_t i = 0; i < sizeof named / sizeof *named; i++) {
        tcheck_context("%s", named[i]);
        CHECK(lines_naming(err, named[i], &all) >= 1);
        tcheck_context_clear();
    }
    CHECK_INT(lines_naming(err, "config: ", &all), 6);
    CHECK_INT(all, 6); /* nothing but the six lines */
    CHECK_NOT_CONTAINS(err, "short-secret1");
    fprintf(stderr, "stderr was:\n%s", err);
    free(err);
}

/* One bad variable on an otherwise valid configuration. */
static void expect_78(const char *setting, const char *var, const char *secret)
{
    const char *const extra[] = {setting, NULL};
    char *err = NULL;
    int status, all = 0;

    tcheck_context("%s", setting);
    status = run_api(tdb_url(db), extra, &err);
    CHECK_INT(status, 78);
    CHECK_INT(lines_naming(err, var, &all), 1);
    CHECK_INT(all, 1);
    if (secret != NULL)
        CHECK_NOT_CONTAINS(err, secret);
    tcheck_context_clear();
    free(err);
}

static void test_each_bad_variable(void)
{
    expect_78("DATABASE_URL", "DATABASE_URL", NULL);
    expect_78("DATABASE_URL=postgresql://u:hunter2-pw@127.0.0.1:1/x?bogus=1", "DATABASE_URL",
              "hunter2-pw");
    expect_78("AMQP_URL", "AMQP_URL", NULL);
    expect_78("AMQP_URL=http://guest:rabbit-pw@127.0.0.1/", "AMQP_URL", "rabbit-pw");
    expect_78("API_TOKEN", "API_TOKEN", NULL);
    expect_78("API_TOKEN=too-short-tokn", "API_TOKEN", "too-short-tokn");
    expect_78("ADMIN_TOKEN", "ADMIN_TOKEN", NULL);
    expect_78("ADMIN_TOKEN=" TAPI_TOKEN, "must differ", TAPI_TOKEN); /* equal tokens */
    expect_78("API_LISTEN=nonsense", "API_LISTEN", NULL);
    expect_78("API_LISTEN=127.0.0.1:70000", "API_LISTEN", NULL);
    expect_78("LOG_LEVEL=loud", "LOG_LEVEL", NULL);
    expect_78("LOG_FORMAT=xml", "LOG_FORMAT", NULL);
    expect_78("OUTBOX_MAX_BACKLOG=abc", "OUTBOX_MAX_BACKLOG", NULL);
    expect_78("GATEWAY_FAILPOINTS=api.before_commit=explode", "GATEWAY_FAILPOINTS", NULL);
    expect_78("AMQP_CACERT=/nonexistent/ca.pem", "AMQP_CACERT", NULL);
    expect_78("COMMIT_THREADS=0", "COMMIT_THREADS", NULL);
}

static void test_tokens_never_logged(void)
{
    static const char *const extra[] = {"API_TOKEN=" SECRET_API_TOKEN, "LOG_LEVEL=loud", NULL};
    char *err = NULL;

    CHECK_INT(run_api(tdb_url(db), extra, &err), 78);
    CHECK_NOT_CONTAINS(err, SECRET_API_TOKEN);
    CHECK_NOT_CONTAINS(err, TAPI_ADMIN_TOKEN);
    free(err);
}

/* A database without this build's schema: exit 1, and the reason in the log. */
static void test_schema(void)
{
    tdb *empty = tdb_create(false);
    char *err = NULL;
    int status;

    if (!CHECK(empty != NULL))
        return;
    status = run_api(tdb_url(empty), NULL, &err);
    CHECK_INT(status, 1);
    CHECK(strstr(err, "event=schema_missing") != NULL ||
          strstr(err, "event=schema_mismatch") != NULL);
    CHECK_NOT_CONTAINS(err, TAPI_TOKEN);
    free(err);

    /* a newer schema than this build knows: refuse too */
    CHECK(tdb_exec(empty,
                   "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT "
                   "NULL, applied_at timestamptz NOT NULL DEFAULT now())",
                   NULL));
    CHECK(tdb_exec(
        empty, "INSERT INTO schema_migrations (version, name) VALUES (1, 'a'), (999, 'b')", NULL));
    status = run_api(tdb_url(empty), NULL, &err);
    CHECK_INT(status, 1);
    CHECK_CONTAINS(err, "event=schema_mismatch");
    free(err);

    /* and an empty schema_migrations is not version 1 */
    CHECK(tdb_exec(empty, "DELETE FROM schema_migrations", NULL));
    status = run_api(tdb_url(empty), NULL, &err);
    CHECK_INT(status, 1);
    CHECK(strstr(err, "event=schema_missing") != NULL ||
          strstr(err, "event=schema_mismatch") != NULL);
    free(err);
    tdb_drop(empty);
}

/* @url with a password added to its user (trust auth ignores it); NULL when it has none. */
static char *url_with_password(const char *url, const char *pw)
{
    const char *scheme = strstr(url, "://");
    const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
    char *out;

    if (at == NULL || memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) != NULL)
        return NULL;
    out = malloc(strlen(url) + strlen(pw) + 2);
    sprintf(out, "%.*s:%s%s", (int)(at - url), url, pw, at);
    return out;
}

/* A good configuration starts, logs JSON lines, never logs secrets, and stops on SIGINT. */
static void test_good_config_starts(void)
{
    static const char *const json[] = {"LOG_FORMAT=json", NULL};
    char *url = url_with_password(tdb_url(db), "db-pw-never-logged");
    const char **env = tapi_env(url ? url : tdb_url(db), json);
    tproc *p = tproc_start(tapi_bin(), env, "config-json");
    char *log = NULL;
    int lines = 0;

    free(env);
    if (!CHECK(p != NULL)) {
        free(url);
        return;
    }
    if (CHECK(tproc_wait_listening(p, 15000) > 0)) { /* it reads the JSON listening line */
        tproc_signal(p, SIGINT);
        CHECK_INT(tproc_wait_exit(p, 10000), 0);
    }
    log = tproc_log(p);
    tproc_free(p);
    if (!CHECK(log != NULL)) {
        free(url);
        return;
    }
    CHECK_NOT_CONTAINS(log, "db-pw-never-logged");
    CHECK_NOT_CONTAINS(log, TAPI_TOKEN);
    CHECK_NOT_CONTAINS(log, TAPI_ADMIN_TOKEN);
    CHECK_CONTAINS(log, "\"event\":\"stopped\"");
    /* with LOG_FORMAT=json every line is a JSON object with ts and event */
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        json_t *o = json_loads(line, 0, NULL);

        tcheck_context("log line %d: %.200s", lines, line);
        CHECK(json_is_object(o));
        CHECK(json_is_string(json_object_get(o, "event")));
        CHECK(json_is_string(json_object_get(o, "ts")));
        tcheck_context_clear();
        json_decref(o);
        lines++;
    }
    CHECK(lines >= 2);
    free(log);
    free(url);
}

static void run(void)
{
    TRUN(test_every_bad_variable);
    TRUN(test_each_bad_variable);
    TRUN(test_tokens_never_logged);
    TRUN(test_schema);
    TRUN(test_good_config_starts);
}

int main(void)
{
    return tapi_main("test_config_exit", &db, NULL, NULL, run);
}
