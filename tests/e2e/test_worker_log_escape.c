/*
 * tests/e2e/test_worker_log_escape.c - a hostile AMQP message_id cannot forge or drop a log line
 *
 * payments-worker, once with LOG_FORMAT=text and once with json, consumes a
 * valid payment whose message_id is not its event_id but a string with a
 * newline followed by "forged_line=yes level=error", quotes that try to close
 * the value, a backslash, control bytes and invalid UTF-8. The worker
 * dead-letters it and logs delivery_invalid with that message_id. Its log
 * must hold that line with the message_id as its value (text: every byte
 * back; JSON: U+FFFD for the invalid ones), no line with a field
 * forged_line, and nothing but lines that parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"
#include "tests/support/tlog.h"

#define WAIT_MS 20000

static te2e e;

static const char hostile[] = "evt-log\" level=\"error\"\nforged_line=yes level=error \\ \r\t\x01"
                              "\xff\xc3( caf\xc3\xa9";
static const char hostile_json[] =
    "evt-log\" level=\"error\"\nforged_line=yes level=error \\ \r\t\x01"
    "\xef\xbf\xbd\xef\xbf\xbd( caf\xc3\xa9";

static void run_one(bool json)
{
    const char *env[] = {json ? "LOG_FORMAT=json" : "LOG_FORMAT=text", NULL};
    char *body = te2e_payment_json("evt-log", "pay-log", 100, "001", "1234-5");
    tprog worker = {0};
    tmq *m = NULL;
    char *path = NULL;
    json_t *line = NULL;
    tmq_pub p = {
        .exchange = "",
        .routing_key = "payments.settlement",
        .body = body,
        .message_id = hostile,
        .attempt = 1,
        .mandatory = true,
    };

    tcheck_context("LOG_FORMAT=%s", json ? "json" : "text");
    if (!CHECK(tprog_start(&worker, TPROG_WORKER, json ? "log_escape-json" : "log_escape-text", &e,
                           env)))
        goto out;
    path = strdup(tproc_log_path(worker.proc));
    m = tmq_connect(e.amqp_url);
    if (!CHECK(m != NULL) || !CHECK_INT(tmq_publish(m, &p), 1))
        goto out;
    CHECK(tproc_wait_log(
        worker.proc, json ? "\"event\":\"delivery_invalid\"" : "event=delivery_invalid", WAIT_MS));
    tprog_stop(&worker, 0);

    line = tlog_check_escaped(path, json, "delivery_invalid", "message_id",
                              json ? hostile_json : hostile,
                              json ? sizeof hostile_json - 1 : sizeof hostile - 1, "warn");
out:
    json_decref(line);
    free(path);
    tmq_close(m);
    tprog_stop(&worker, 0);
    free(body);
    tcheck_context_clear();
}

static void run(void)
{
    if (!CHECK(te2e_insert_payment(e.db, "evt-log", "pay-log", 100, "001", "1234-5")))
        return;
    run_one(false);
    run_one(true);
    /* both went to the DLQ, neither settled anything */
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), 0);
}

int main(void)
{
    return te2e_main("worker_log_escape", &e, run);
}
