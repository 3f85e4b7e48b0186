/*
 * tests/unit/test_log.c - shared/log: one parsable line per event, whatever the bytes
 *
 * Values from outside (a request path, an AMQP message_id, a broker's reply
 * text) hold newlines, quotes, backslashes, control bytes and invalid UTF-8.
 * In both formats each event must stay exactly one line that parses (text:
 * key=value with quoted, escaped values; JSON: jansson), must not let the
 * value forge a field or a line, and must carry the value itself: text gives
 * back every byte, JSON every valid UTF-8 sequence with U+FFFD for the rest.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "shared/lib/log.h"
#include "tests/support/tcheck.h"
#include "tests/support/tlog.h"

/* A request path as MHD hands it over (percent-decoded): every kind of hostile byte. */
static const char hostile[] = "/v1/x\nforged_line=yes level=error \"q\" \\ \r\t\x01\x7f "
                              "\xff\xc3( caf\xc3\xa9 \xe2\x80\xa8"
                              "end";
/* The same as JSON gives it back: each invalid byte is U+FFFD, the rest unchanged. */
static const char hostile_json[] = "/v1/x\nforged_line=yes level=error \"q\" \\ \r\t\x01\x7f "
                                   "\xef\xbf\xbd\xef\xbf\xbd( caf\xc3\xa9 \xe2\x80\xa8"
                                   "end";
/* A message_id that tries to close its quotes and start fields of its own. */
static const char hostile_id[] = "evt-1\" level=\"error\nforged_line=yes \xfe";
static const char hostile_id_json[] = "evt-1\" level=\"error\nforged_line=yes \xef\xbf\xbd";

static FILE *capture_file;
static int saved_stderr = -1;

/* Send stderr (the log) to a fresh temporary file until capture_end(). */
static void capture_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    if (capture_file == NULL)
        abort();
    saved_stderr = dup(STDERR_FILENO);
    dup2(fileno(capture_file), STDERR_FILENO);
}

/* Restore stderr; what was logged, as a new string. */
static char *capture_end(void)
{
    long n;
    char *s;

    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    n = ftell(capture_file);
    if (n < 0)
        n = 0;
    s = calloc(1, (size_t)n + 1);
    if (s == NULL)
        abort();
    rewind(capture_file);
    if (fread(s, 1, (size_t)n, capture_file) != (size_t)n)
        abort();
    fclose(capture_file);
    return s;
}

/* @log is exactly @want lines, each ended by '\n' and each parsing in @json or text. */
static bool check_lines(const char *log, bool json, int want)
{
    int newlines = 0;

    for (const char *p = log; *p; p++)
        newlines += *p == '\n';
    if (!CHECK_INT(newlines, want))
        fprintf(stderr, "the log was:\n%s\n", log);
    CHECK(want == 0 || log[strlen(log) - 1] == '\n');
    return CHECK_INT(tlog_check_lines(log, json, "forged_line"), want);
}

/* begin_rejected - log at info in @format, start the capture, log a request_rejected of hostile. */
static void begin_rejected(log_format format)
{
    log_init("test", LOG_INFO, format);
    capture_begin();
    log_info("request_rejected", "request_id=%s method=%s path=%s status=%d problem=%s", "abc",
             "GET", hostile, 404, "not-found");
}

static void test_text_request_path(void)
{
    json_t *line;
    char *log;

    begin_rejected(LOG_FORMAT_TEXT);
    log = capture_end();
    check_lines(log, false, 1);
    CHECK_CONTAINS(log, " level=info program=test event=request_rejected request_id=abc ");
    line = tlog_find_event(log, false, "request_rejected");
    if (CHECK(line != NULL)) {
        tlog_value_is(line, "path", hostile, sizeof hostile - 1);
        CHECK_STR(json_string_value(json_object_get(line, "level")), "info");
        CHECK_STR(json_string_value(json_object_get(line, "status")), "404");
        CHECK_STR(json_string_value(json_object_get(line, "problem")), "not-found");
    }
    json_decref(line);
    free(log);
}

static void test_text_quoted_slot(void)
{
    static const char reply[] = "NOT_FOUND - no\nqueue \"x\"\xff and more after the length";
    json_t *line;
    char *log;

    log_init("test", LOG_INFO, LOG_FORMAT_TEXT);
    capture_begin();
    log_warn("delivery_invalid", "message_id=\"%s\" delivery_tag=%llu bytes=%zu", hostile_id, 7ULL,
             (size_t)42);
    log_warn("mq_error", "op=%s channel_close=%u text=\"%.*s\"", "basic.publish", 404u, 24, reply);
    log = capture_end();
    check_lines(log, false, 2);
    line = tlog_find_event(log, false, "delivery_invalid");
    if (CHECK(line != NULL)) {
        tlog_value_is(line, "message_id", hostile_id, sizeof hostile_id - 1);
        CHECK_STR(json_string_value(json_object_get(line, "delivery_tag")), "7");
        CHECK_STR(json_string_value(json_object_get(line, "bytes")), "42");
    }
    json_decref(line);
    line = tlog_find_event(log, false, "mq_error");
    if (CHECK(line != NULL))
        tlog_value_is(line, "text", reply, 24);
    json_decref(line);
    free(log);
}

/* What the code writes itself is unchanged: numbers, fixed words, fixed quoted hints. */
static void test_text_trusted(void)
{
    json_t *line;
    char *log;

    log_init("test", LOG_DEBUG, LOG_FORMAT_TEXT);
    capture_begin();
    log_info("stopped", "status=%d", 0);
    log_error("schema_mismatch",
              "have=%d want=%d hint=\"run scripts/migrate with this build's sql/\"", 3, 10);
    log_debug("numbers", "a=%" PRId64 " b=%llu c=0x%08x d=%.2f e=%ld f=%s g=%s%%", (int64_t)-5,
              18446744073709551615ULL, 0xbeefu, 2.5, -7L, "", "x y");
    log_debug("widths", "h=%hd i=%hhu j=%5zu k=%-3td l=%jd m=%+d n=%lx o=%zd", (short)-3,
              (unsigned char)250, (size_t)42, (ptrdiff_t)-1, (intmax_t)-9000000000LL, 4, 255UL,
              (ssize_t)-2);
    log = capture_end();
    check_lines(log, false, 4);
    CHECK_CONTAINS(log, " h=-3 i=250 j=\"   42\" k=\"-1 \" l=-9000000000 m=+4 n=ff o=-2\n");
    CHECK_CONTAINS(log, " event=stopped status=0\n");
    CHECK_CONTAINS(log, " event=schema_mismatch have=3 want=10 "
                        "hint=\"run scripts/migrate with this build's sql/\"\n");
    CHECK_CONTAINS(log,
                   " a=-5 b=18446744073709551615 c=0x0000beef d=2.50 e=-7 f=\"\" g=\"x y%\"\n");
    line = tlog_find_event(log, false, "numbers");
    if (CHECK(line != NULL))
        tlog_value_is(line, "g", "x y%", 4);
    json_decref(line);
    free(log);
}

/* A value far longer than any buffer is cut, never split into lines or left unparsable. */
static void test_long_values(void)
{
    size_t n = 20000;
    char *big = malloc(n + 1);
    char *log;

    if (big == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        big[i] = "\n\"\\\xff\xc3 a"[i % 7];
    big[n] = '\0';
    for (int json = 0; json <= 1; json++) {
        tcheck_context("%s", json ? "json" : "text");
        log_init("test", LOG_INFO, json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
        capture_begin();
        log_warn("big", "a=%s b=\"%s\" c=%s d=%d", big, big, big, 1);
        log = capture_end();
        check_lines(log, json, 1);
        free(log);
    }
    tcheck_context_clear();
    free(big);
}

static void test_json(void)
{
    json_t *line;
    char *log;

    begin_rejected(LOG_FORMAT_JSON);
    log_warn("delivery_invalid", "message_id=\"%s\" delivery_tag=%llu bytes=%zu", hostile_id, 7ULL,
             (size_t)42);
    log_error("schema_missing", "want=%d hint=\"run scripts/migrate\"", 10);
    log = capture_end();
    check_lines(log, true, 3);
    line = tlog_find_event(log, true, "request_rejected");
    if (CHECK(line != NULL)) {
        tlog_value_is(line, "path", hostile_json, sizeof hostile_json - 1);
        CHECK_STR(json_string_value(json_object_get(line, "level")), "info");
        CHECK_STR(json_string_value(json_object_get(line, "request_id")), "abc");
        CHECK_STR(json_string_value(json_object_get(line, "status")), "404");
        CHECK_STR(json_string_value(json_object_get(line, "problem")), "not-found");
    }
    json_decref(line);
    line = tlog_find_event(log, true, "delivery_invalid");
    if (CHECK(line != NULL)) {
        tlog_value_is(line, "message_id", hostile_id_json, sizeof hostile_id_json - 1);
        CHECK_STR(json_string_value(json_object_get(line, "level")), "warn");
        CHECK_STR(json_string_value(json_object_get(line, "delivery_tag")), "7");
    }
    json_decref(line);
    line = tlog_find_event(log, true, "schema_missing");
    if (CHECK(line != NULL))
        CHECK_STR(json_string_value(json_object_get(line, "hint")), "run scripts/migrate");
    json_decref(line);
    free(log);
}

/* The bytes written to the capture so far (the log goes straight to the file, unbuffered). */
static long captured(void)
{
    struct stat st;

    return fstat(STDERR_FILENO, &st) == 0 ? (long)st.st_size : -1;
}

/* log_hold: info lines wait for the release and go out in order, in both formats; a warning
 * goes out at once, after the lines held before it; holds nest. */
static void test_hold(void)
{
    for (int json = 0; json <= 1; json++) {
        char *log;
        long before;

        log_init("test", LOG_INFO, json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
        capture_begin();
        log_hold();
        log_hold();
        log_info("payment_settled", "event_id=%s n=%d", "e-1", 1);
        log_info("payment_settled", "event_id=%s n=%d", hostile_id, 2);
        CHECK_INT(captured(), 0);
        log_release(); /* the inner one: still held */
        CHECK_INT(captured(), 0);
        log_info("payment_settled", "event_id=%s n=%d", "e-3", 3);
        log_warn("settle_after_dead_letter", "event_id=%s", "e-4");
        before = captured();
        CHECK(before > 0);
        log_info("payment_settled", "event_id=%s n=%d", "e-5", 5);
        CHECK_INT(captured(), before);
        log_release();
        CHECK(captured() > before);
        log_info("payment_settled", "event_id=%s n=%d", "e-6", 6); /* not held */
        log = capture_end();
        check_lines(log, json, 6);
        for (int k = 1; k <= 6; k++) { /* in the order they were logged */
            char mark[16];
            const char *at;

            snprintf(mark, sizeof mark, k == 4 ? "e-4" : json ? "\"n\":\"%d\"" : "n=%d", k);
            at = strstr(log, mark);
            if (!CHECK(at != NULL))
                continue;
            for (int j = 1; j < k; j++) {
                char prev[16];

                snprintf(prev, sizeof prev, j == 4 ? "e-4" : json ? "\"n\":\"%d\"" : "n=%d", j);
                CHECK(strstr(log, prev) != NULL && strstr(log, prev) < at);
            }
        }
        free(log);
    }
}

int main(void)
{
    TRUN(test_text_request_path);
    TRUN(test_text_quoted_slot);
    TRUN(test_text_trusted);
    TRUN(test_long_values);
    TRUN(test_json);
    TRUN(test_hold);
    return tcheck_summary("test_log");
}
