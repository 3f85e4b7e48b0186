/*
 * tests/integration/test_log_escape.c - a hostile request path cannot forge or drop a log line
 *
 * payments-api, once with LOG_FORMAT=text and once with json, gets a request
 * whose path (percent-decoded by the server) holds a newline followed by
 * "forged_line=yes level=error", quotes, a backslash, control bytes and
 * invalid UTF-8. Its log must hold the request_rejected line with that path
 * as its value (text: every byte back; JSON: U+FFFD for the invalid ones),
 * no line with a field forged_line, and nothing but lines that parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tlog.h"
#include "tests/support/tproc.h"

static tdb *db;

static const char sent[] = "/v1/x%0Aforged_line%3Dyes%20level%3Derror%20%22q%22%20%5C%0D%09%01"
                           "%FF%C3(%20caf%C3%A9";
static const char decoded[] = "/v1/x\nforged_line=yes level=error \"q\" \\\r\t\x01\xff\xc3( "
                              "caf\xc3\xa9";
static const char decoded_json[] = "/v1/x\nforged_line=yes level=error \"q\" \\\r\t\x01"
                                   "\xef\xbf\xbd\xef\xbf\xbd( caf\xc3\xa9";

static void run(bool json)
{
    const char *extra[] = {json ? "LOG_FORMAT=json" : "LOG_FORMAT=text", NULL};
    const char *headers[] = {"Authorization: Bearer " TAPI_TOKEN,
                             "X-Request-Id: rid\" forged_line=yes", NULL};
    char url[512], *path = NULL;
    json_t *line = NULL;
    tapi a;
    thttp_resp r;

    tcheck_context("LOG_FORMAT=%s", json ? "json" : "text");
    if (!CHECK(tapi_start(&a, json ? "log_escape-json" : "log_escape-text", tdb_url(db), extra)))
        return;
    path = strdup(tproc_log_path(a.proc));
    snprintf(url, sizeof url, "%s%s", a.url, sent);
    thttp_request("GET", url, headers, NULL, 0, &r);
    CHECK_INT(r.status, 404);
    thttp_resp_free(&r);
    CHECK(tproc_wait_log(a.proc, json ? "\"event\":\"request_rejected\"" : "event=request_rejected",
                         5000));
    tapi_stop(&a);

    line = tlog_check_escaped(path, json, "request_rejected", "path", json ? decoded_json : decoded,
                              json ? sizeof decoded_json - 1 : sizeof decoded - 1, "info");
    if (line != NULL) {
        CHECK_STR(json_string_value(json_object_get(line, "method")), "GET");
        CHECK_STR(json_string_value(json_object_get(line, "status")), "404");
    }
    json_decref(line);
    free(path);
    tcheck_context_clear();
}

static void test_text(void)
{
    run(false);
}

static void test_json(void)
{
    run(true);
}

static void run_all(void)
{
    TRUN(test_text);
    TRUN(test_json);
}

int main(void)
{
    return tapi_main("test_log_escape", &db, NULL, NULL, run_all);
}
