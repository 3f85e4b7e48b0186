/*
 * tests/faults/test_fault_http_garbage.c - garbage at payments-api: 4xx or a closed connection,
 * never a 5xx, never a crash (openapi/payments.yaml)
 *
 * Bodies over HTTP (curl): seeded random bytes, seeded mutations of a valid payment, JSON nested
 * 10,000 (and 60,000) deep, invalid UTF-8 in values and keys, NUL bytes raw and as \u0000, huge
 * and malformed numbers, duplicate member names, 70 KiB bodies (with Content-Length and
 * chunked), wrong Content-Type and Authorization. Every answer is a 4xx (a mutation that happens
 * to stay a valid payment may get its 202); the error answers are application/problem+json.
 * Raw sockets: seeded random request bytes, broken request lines, headers without a colon, NUL in
 * a header, a 100 KB URL and header, thousands of headers, bad Content-Length and chunked
 * framing, a body cut short then a close. Each answer is a 4xx or the server closes the
 * connection (an HTTP/1.x version other than 1.0/1.1 may get 505, the one 5xx HTTP defines for
 * the client's own request line; a few requests libmicrohttpd tolerates, such as HTTP/1.1 without
 * Host, may be served; a half-closed connection with no complete request may be held until the
 * idle timeout).
 * Afterwards the same process still runs, /healthz is 200, a normal payment gets its 202, its log
 * has no error line, and SIGTERM stops it with 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/faults/tfault.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tsock.h"

#define RANDOM_BODIES   40
#define MUTATIONS       40
#define RANDOM_REQUESTS 30
#define RAW_TIMEOUT_MS  3000
#define KIB             1024

static tf_world w;
static tf_rng rng;
static int sent, accepted_mutations;
static int answers[1001]; /* how often each status came back; [0]: closed without an answer */

static void count_answer(long status)
{
    answers[status >= 0 && status <= 1000 ? status : 1000]++;
}

static void print_answers(void)
{
    printf("answers:");
    for (int i = 0; i <= 1000; i++)
        if (answers[i] > 0)
            printf(" %s%d x%d", i == 0 ? "closed" : "", i == 0 ? 0 : i, answers[i]);
    printf("\n");
}

/* A growable byte buffer (bodies may hold NUL bytes). */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL)
            abort();
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void repeat(buf *b, const char *s, size_t times)
{
    for (size_t i = 0; i < times; i++)
        puts_(b, s);
}

static void reset(buf *b)
{
    b->len = 0;
    if (b->p != NULL)
        b->p[0] = '\0';
}

/* A valid payment with @name_json (raw JSON text, may hold any bytes) as the payer's name. */
static void payment_with(buf *b, int i, const char *name_json, size_t name_len)
{
    char head[256];

    snprintf(head, sizeof head,
             "{\"event_id\":\"g-e%d\",\"payment_id\":\"g-p%d\",\"method\":\"pix\","
             "\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
             "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"},\"payer\":{\"name\":",
             i, i);
    reset(b);
    puts_(b, head);
    put(b, name_json, name_len);
    puts_(b, "}}");
}

/* A payment whose amount_cents is the raw JSON text @amount. */
static void payment_amount(buf *b, int i, const char *amount)
{
    char s[512];

    snprintf(s, sizeof s,
             "{\"event_id\":\"g-a%d\",\"payment_id\":\"g-q%d\",\"method\":\"pix\","
             "\"decision\":\"approved\",\"amount_cents\":%s,\"currency\":\"BRL\","
             "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"}}",
             i, i, amount);
    reset(b);
    puts_(b, s);
}

/* payment_plus - payment_amount() (amount 100) with @member ("key":value) added at the end. */
static void payment_plus(buf *b, int i, const char *member)
{
    payment_amount(b, i, "100");
    b->p[--b->len] = '\0'; /* the closing brace */
    puts_(b, ",");
    puts_(b, member);
    puts_(b, "}");
}

static bool api_alive(void)
{
    if (tf_running(&w, TF_API))
        return true;
    FAIL("payments-api died (status %d)", tproc_wait_exit(tf_proc(&w, TF_API), 0));
    tproc_print_log_tail(tf_proc(&w, TF_API), 40);
    return false;
}

/*
 * post - POST @len bytes to /v1/payments with @headers (NULL: the API token and JSON), and check
 * the answer: a 4xx problem (or, with @may_accept, a 202). Returns the status.
 */
static long post(const char *what, const void *body, size_t len, const char *const *headers,
                 bool chunked, bool may_accept)
{
    static const char *const def[] = {"Authorization: Bearer " TAPI_TOKEN,
                                      "Content-Type: application/json", NULL};
    char url[128];
    thttp_req req = {.method = "POST",
                     .url = url,
                     .headers = headers ? headers : def,
                     .body = body,
                     .len = len,
                     .chunked = chunked,
                     .timeout_ms = 10000};
    thttp_resp r;
    const char *ct;
    long status;

    snprintf(url, sizeof url, "%s/v1/payments", w.api.url);
    thttp_do(&req, &r);
    sent++;
    status = r.status;
    count_answer(status);
    tcheck_context("%s", what);
    if (status == 202 && may_accept) {
        accepted_mutations++;
    } else if (!CHECK(status >= 400 && status < 500)) {
        fprintf(stderr, "  %s: %ld %s%.200s\n", what, status, r.error, r.body);
    } else {
        ct = thttp_header(&r, "Content-Type");
        CHECK(ct != NULL && strncmp(ct, "application/problem+json", 24) == 0);
    }
    tcheck_context_clear();
    thttp_resp_free(&r);
    api_alive();
    return status;
}

static long post_buf(const char *what, const buf *b)
{
    return post(what, b->p, b->len, NULL, false, false);
}

/* post_text - post_buf() of the text @text, built in @b. */
static long post_text(const char *what, buf *b, const char *text)
{
    reset(b);
    puts_(b, text);
    return post_buf(what, b);
}

/*
 * raw - send @len bytes on a socket (then shut the write side) and check the answer: a 4xx, or
 * the connection closed without one; @may_505 for a request line with an HTTP version the server
 * does not speak; @may_2xx for a request a lenient server may well serve.
 */
static int raw_ex(const char *what, const void *data, size_t len, bool may_505, bool may_2xx,
                  bool may_hold)
{
    int st = tf_raw(w.api.port, data, len, true, RAW_TIMEOUT_MS);

    sent++;
    count_answer(st);
    if (strncmp(what, "random", 6) != 0)
        printf("  raw %s: %s%d\n", what, st == 0 ? "closed " : st == -1 ? "held " : "", st);
    tcheck_context("raw %s", what);
    if (!(st == 0 || (st >= 400 && st < 500) || (may_505 && st == 505) ||
          (may_2xx && st >= 200 && st < 300) || (may_hold && st == -1)))
        FAIL("answer %d (0: closed, -1: no answer within %d ms, -2: connect failed, 999: not "
             "HTTP)",
             st, RAW_TIMEOUT_MS);
    tcheck_context_clear();
    api_alive();
    return st;
}

static int raw(const char *what, const void *data, size_t len, bool may_505, bool may_2xx)
{
    return raw_ex(what, data, len, may_505, may_2xx, false);
}

static int raw_str(const char *what, const char *s, bool may_505, bool may_2xx)
{
    return raw(what, s, strlen(s), may_505, may_2xx);
}

static void bodies(void)
{
    static const char *const invalid_utf8[] = {
        "\x80",         "\xbf",         "\xc0\x80",     "\xc1\xbf",         "\xc3\x28",
        "\xe0\x80\x80", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80",
        "\xfe",         "\xff\xfe",     "\xe2\x82",     "\xf0\x9f\x98",
    };
    static const char *const amounts[] = {
        "1e400",
        "-1e400",
        "123456789012345678901234567890",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "10000000000001",
        "-1",
        "1.0",
        "150.0",
        "1e2",
        "1E2",
        "-0",
        "0.0",
        "00",
        "01",
        "+1",
        "0x10",
        "NaN",
        "Infinity",
        "-Infinity",
        "1e-400",
        "\"100\"",
        "true",
        "null",
        "[100]",
        "{\"v\":100}",
        ".5",
        "5.",
        "1e",
        "--1",
        "1_000",
    };
    char what[96], name[64];
    buf b = {0};

    /* seeded random bytes */
    for (int i = 0; i < RANDOM_BODIES; i++) {
        size_t n = (size_t)tf_rng_range(&rng, 1, 3000);

        reset(&b);
        for (size_t k = 0; k < n; k++) {
            char c = (char)(tf_rng_next(&rng) & 0xff);
            put(&b, &c, 1);
        }
        snprintf(what, sizeof what, "random body %d (%zu bytes)", i, n);
        post_buf(what, &b);
    }
    /* seeded mutations of a valid payment: delete, insert or replace a byte */
    for (int i = 0; i < MUTATIONS; i++) {
        static const char set[] = "{}[]\":,\\ 0123456789-eE.tfn\x01\x7f\x80\xff";
        size_t pos;
        int op = (int)tf_rng_range(&rng, 0, 2);
        char c = set[tf_rng_range(&rng, 0, (long long)sizeof set - 2)];

        payment_with(&b, 1000 + i, "\"Maria Silva\"", 13);
        pos = (size_t)tf_rng_range(&rng, 0, (long long)b.len - 1);
        if (op == 0) {
            memmove(b.p + pos, b.p + pos + 1, b.len - pos);
            b.len--;
        } else if (op == 1) {
            put(&b, "", 1); /* room for one more byte */
            memmove(b.p + pos + 1, b.p + pos, b.len - pos - 1);
            b.p[pos] = c;
        } else {
            b.p[pos] = c;
        }
        snprintf(what, sizeof what, "mutation %d (%s at %zu)", i,
                 op == 0   ? "delete"
                 : op == 1 ? "insert"
                           : "replace",
                 pos);
        post(what, b.p, b.len, NULL, false, true);
    }
    /* nesting */
    reset(&b);
    repeat(&b, "[", 10000);
    repeat(&b, "]", 10000);
    post_buf("array nested 10,000 deep", &b);
    reset(&b);
    repeat(&b, "{\"a\":", 10000);
    puts_(&b, "1");
    repeat(&b, "}", 10000);
    post_buf("object nested 10,000 deep", &b);
    reset(&b);
    repeat(&b, "[", 10000);
    post_buf("10,000 unclosed arrays", &b);
    reset(&b);
    repeat(&b, "[", 60000);
    repeat(&b, "]", 2000);
    post_buf("60,000 arrays deep", &b);
    {
        buf deep = {0};

        repeat(&deep, "[", 10000);
        repeat(&deep, "]", 10000);
        payment_with(&b, 1, deep.p, deep.len);
        post_buf("payer.name nested 10,000 deep", &b);
        free(deep.p);
    }
    /* invalid UTF-8: in a value, in a key, a byte-order mark */
    for (size_t i = 0; i < sizeof invalid_utf8 / sizeof invalid_utf8[0]; i++) {
        snprintf(name, sizeof name, "\"Mar%sia\"", invalid_utf8[i]);
        payment_with(&b, 2, name, strlen(name));
        snprintf(what, sizeof what, "invalid UTF-8 #%zu in a value", i);
        post_buf(what, &b);
        snprintf(name, sizeof name, "\"Maria\",\"k%s\":1", invalid_utf8[i]);
        payment_with(&b, 2, name, strlen(name));
        snprintf(what, sizeof what, "invalid UTF-8 #%zu in a key", i);
        post_buf(what, &b);
    }
    payment_with(&b, 3, "\"\\ud800\"", 8);
    post_buf("a lone high surrogate escape", &b);
    payment_with(&b, 3, "\"\\udc00x\"", 9);
    post_buf("a lone low surrogate escape", &b);
    payment_with(&b, 3, "\"Maria\"", 7);
    {
        buf bom = {0};

        puts_(&bom, "\xef\xbb\xbf");
        put(&bom, b.p, b.len);
        post_buf("a byte-order mark first", &bom);
        free(bom.p);
    }
    /* NUL bytes: raw in a value, after the document, first; escaped in a value, a key, an id */
    payment_with(&b, 4, "\"Ma\0ria\"", 8);
    post_buf("a raw NUL in a value", &b);
    payment_with(&b, 4, "\"Maria\"", 7);
    put(&b, "\0", 1);
    post_buf("a raw NUL after the document", &b);
    {
        buf nul = {0};

        put(&nul, "\0", 1);
        put(&nul, b.p, b.len - 1);
        post_buf("a raw NUL first", &nul);
        free(nul.p);
    }
    payment_with(&b, 4, "\"Ma\\u0000ria\"", 13);
    post_buf("\\u0000 in a value", &b);
    payment_with(&b, 4, "\"Maria\",\"a\\u0000b\":1", 20);
    post_buf("\\u0000 in a key", &b);
    post_text("\\u0000 in event_id", &b,
              "{\"event_id\":\"g-n\\u0000\",\"payment_id\":\"g-n\",\"method\":\"pix\",\"decision\":"
              "\"approved\",\"amount_cents\":1,\"currency\":\"BRL\",\"payee\":{\"bank\":\"001\","
              "\"account\":\"1\"}}");
    /* numbers */
    for (size_t i = 0; i < sizeof amounts / sizeof amounts[0]; i++) {
        payment_amount(&b, (int)i, amounts[i]);
        snprintf(what, sizeof what, "amount_cents %s", amounts[i]);
        /* -0 is a JSON integer literal of the value 0, which the contract accepts */
        post(what, b.p, b.len, NULL, false, strcmp(amounts[i], "-0") == 0);
    }
    /* duplicate member names */
    payment_plus(&b, 90, "\"amount_cents\":100");
    post_buf("amount_cents twice, same value", &b);
    payment_plus(&b, 91, "\"event_id\":\"other\"");
    post_buf("event_id twice, other value", &b);
    post_text("payee.bank twice", &b,
              "{\"event_id\":\"g-d\",\"payment_id\":\"g-d\",\"method\":\"pix\",\"decision\":"
              "\"approved\",\"amount_cents\":1,\"currency\":\"BRL\",\"payee\":{\"bank\":\"001\","
              "\"bank\":\"001\",\"account\":\"1\"}}");
    /* sizes: 70 KiB with Content-Length (a long name, trailing white space) and chunked */
    {
        buf big = {0};

        puts_(&big, "\"");
        repeat(&big, "x", 70 * KIB);
        puts_(&big, "\"");
        payment_with(&b, 5, big.p, big.len);
        post_buf("70 KiB payer name", &b);
        post("70 KiB payer name, chunked", b.p, b.len, NULL, true, false);
        payment_with(&b, 5, "\"Maria\"", 7);
        reset(&big);
        put(&big, b.p, b.len);
        repeat(&big, " ", 70 * KIB);
        post_buf("70 KiB of trailing white space", &big);
        free(big.p);
    }
    /* empty and non-object bodies, wrong Content-Type, bad Authorization */
    post("empty body", "", 0, NULL, false, false);
    post_buf("null", &(buf){"null", 4, 5});
    post_buf("a string", &(buf){"\"x\"", 3, 4});
    post_buf("an array", &(buf){"[]", 2, 3});
    post_buf("a number", &(buf){"42", 2, 3});
    payment_with(&b, 6, "\"Maria\"", 7);
    {
        const char *text[] = {"Authorization: Bearer " TAPI_TOKEN, "Content-Type: text/plain",
                              NULL};
        const char *none[] = {"Authorization: Bearer " TAPI_TOKEN, "Content-Type:", NULL};
        const char *basic[] = {"Authorization: Basic dXNlcjpwYXNz",
                               "Content-Type: application/json", NULL};
        const char *admin[] = {"Authorization: Bearer " TAPI_ADMIN_TOKEN,
                               "Content-Type: application/json", NULL};
        const char *idem[] = {"Authorization: Bearer " TAPI_TOKEN, "Content-Type: application/json",
                              "Idempotency-Key: \x01\xff", NULL};
        char longauth[12 * KIB];
        const char *lng[] = {longauth, "Content-Type: application/json", NULL};

        snprintf(longauth, sizeof longauth, "Authorization: Bearer ");
        memset(longauth + 22, 'A', sizeof longauth - 23);
        longauth[sizeof longauth - 1] = '\0';
        post("Content-Type text/plain", b.p, b.len, text, false, false);
        post("no Content-Type", b.p, b.len, none, false, false);
        post("Basic authorization", b.p, b.len, basic, false, false);
        post("the admin token on /v1", b.p, b.len, admin, false, false);
        post("a binary Idempotency-Key", b.p, b.len, idem, false, false);
        post("a 12 KiB bearer token", b.p, b.len, lng, false, false);
    }
    free(b.p);
}

/* "POST /v1/payments HTTP/1.1" with the usual headers, then @extra lines, then @body. */
static void request(buf *b, const char *extra, const char *body)
{
    reset(b);
    puts_(b, "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " TAPI_TOKEN
             "\r\nContent-Type: application/json\r\n");
    puts_(b, extra);
    puts_(b, "\r\n");
    puts_(b, body);
}

static void raw_requests(void)
{
    /* bad framing of a POST: @headers added, then @body */
    static const struct {
        const char *what, *headers, *body;
    } framing[] = {
        {"Content-Length abc", "Content-Length: abc\r\n", "{}"},
        {"Content-Length -1", "Content-Length: -1\r\n", "{}"},
        {"Content-Length past 64 bits", "Content-Length: 99999999999999999999999\r\n", "{}"},
        {"two Content-Lengths", "Content-Length: 2\r\nContent-Length: 20\r\n", "{}"},
        {"Content-Length and chunked", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
         "2\r\n{}\r\n0\r\n\r\n"},
        {"a chunk size of letters", "Transfer-Encoding: chunked\r\n", "ZZZ\r\nabc\r\n0\r\n\r\n"},
        {"a chunk size past 64 bits", "Transfer-Encoding: chunked\r\n",
         "FFFFFFFFFFFFFFFFFFFF\r\nabc\r\n"},
    };
    char what[64];
    buf b = {0};

    for (int i = 0; i < RANDOM_REQUESTS; i++) {
        size_t n = (size_t)tf_rng_range(&rng, 1, 600);
        bool printable = i % 2 == 0;

        reset(&b);
        for (size_t k = 0; k < n; k++) {
            char c =
                printable ? (char)tf_rng_range(&rng, 32, 126) : (char)(tf_rng_next(&rng) & 0xff);
            put(&b, &c, 1);
        }
        puts_(&b, "\r\n\r\n");
        snprintf(what, sizeof what, "random request %d (%zu %s bytes)", i, n,
                 printable ? "printable" : "binary");
        raw(what, b.p, b.len, false, false);
    }
    /*
     * Only empty lines, then FIN. libmicrohttpd 0.9.75 (epoll, edge-triggered) now and then
     * misses the end of a stream that arrived together with the last bytes, and holds the
     * connection until its idle timeout (30 s): tolerated here ("held"), reported in
     * docs/failure-matrix.md.
     */
    raw_ex("only empty lines", "\r\n\r\n", 4, false, false, true);
    raw_str("a method alone", "GET\r\n\r\n", false, false);
    raw_str("HTTP/9.9", "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", true, false);
    raw_str("HTTP/2.0 in an HTTP/1 request line", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", true,
            false);
    raw_str("a version of letters", "GET /healthz HTTP/x.y\r\nHost: x\r\n\r\n", false, false);
    /* RFC 9112 wants a 400 here; libmicrohttpd's default discipline serves it */
    raw_str("HTTP/1.1 without Host", "GET /healthz HTTP/1.1\r\n\r\n", false, true);
    {
        static const char nul_method[] = "G\0T /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
        static const char nul_header[] =
            "GET /v1/payments/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \0\r\n\r\n";

        raw("NUL in the method", nul_method, sizeof nul_method - 1, false, false);
        raw("NUL in a header", nul_header, sizeof nul_header - 1, false, false);
    }
    raw_str("a header without a colon", "GET /healthz HTTP/1.1\r\nHost x\r\n\r\n", false, true);
    raw_str("a space before the colon", "GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", false, true);
    raw_str("an obs-fold continuation", "GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
            false, true);
    raw_str(
        "a method of 300 letters",
        "GETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGE"
        "TGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGE"
        "TGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGE"
        "TGETGETGETGETGETGETGETGETGETGETGETGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        false, false);
    raw_str("an unknown method on /v1/payments",
            "BREW /v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TAPI_TOKEN "\r\n\r\n",
            false, false);
    /* sizes */
    reset(&b);
    puts_(&b, "GET /");
    repeat(&b, "a", 100 * KIB);
    puts_(&b, " HTTP/1.1\r\nHost: x\r\n\r\n");
    raw("a 100 KB URL", b.p, b.len, false, false);
    reset(&b);
    puts_(&b, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    repeat(&b, "b", 100 * KIB);
    puts_(&b, "\r\n\r\n");
    raw("a 100 KB header", b.p, b.len, false, false);
    reset(&b);
    puts_(&b, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    repeat(&b, "X-H: v\r\n", 5000);
    puts_(&b, "\r\n");
    raw("5,000 headers", b.p, b.len, false, false);
    /* framing */
    for (size_t i = 0; i < sizeof framing / sizeof framing[0]; i++) {
        request(&b, framing[i].headers, framing[i].body);
        raw(framing[i].what, b.p, b.len, false, false);
    }
    /* RFC 9112 wants a 400 (no way to find the body's end); libmicrohttpd reads to the end */
    request(&b, "Transfer-Encoding: gzip\r\n", "{}");
    raw_ex("Transfer-Encoding gzip", b.p, b.len, false, false, true);
    /* the same end-of-stream blindness as above, now and then: held until the idle timeout */
    request(&b, "Content-Length: 500\r\n", "{\"event_id\":\"g-cut\",\"payment_id\":");
    raw_ex("a body cut short, then the write side closed", b.p, b.len, false, false, true);
    /* a body cut short and the connection dropped at once, a few times */
    for (int i = 0; i < 5; i++) {
        int fd = tsock_connect(w.api.port);

        sent++;
        if (CHECK(fd >= 0)) {
            request(&b, "Content-Length: 70000\r\n", "{\"event_id\":\"g-cut\",\"payment_id\":");
            (void)!send(fd, b.p, b.len, MSG_NOSIGNAL);
            close(fd);
        }
    }
    tproc_sleep_ms(200);
    api_alive();
    free(b.p);
}

static void healthy_after(void)
{
    char *body = tapi_payment("g-final", "g-final-p");
    thttp_resp r;

    thttp_get(w.api.url, "/healthz", NULL, &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    tapi_post(&w.api, body, NULL, &r);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);
    free(body);
    CHECK_INT(tproc_log_count(tf_proc(&w, TF_API), "level=error"), 0);
    CHECK_INT(tproc_log_count(tf_proc(&w, TF_API), "event=http_no_answer"), 0);
}

static void run(void)
{
    uint64_t seed = tf_seed(w.e.name);
    pid_t pid;

    tf_rng_init(&rng, seed);
    if (!CHECK(tf_start(&w, TF_API, NULL)))
        return;
    pid = tproc_pid(tf_proc(&w, TF_API));
    bodies();
    printf("%d bodies sent (%d mutations stayed valid and got 202)\n", sent, accepted_mutations);
    raw_requests();
    printf("%d inputs sent in all\n", sent);
    print_answers();
    if (api_alive()) {
        CHECK_INT(tproc_pid(tf_proc(&w, TF_API)), pid);
        healthy_after();
    }
    tf_figures("http_garbage", 0, 0, 0, sent);
    tf_stop(&w, TF_API); /* exit 0: under ASan, no leak either */
    tf_check_logs(&w);
}

int main(void)
{
    return tf_main(&w, "fault-http-garbage", "test_fault_http_garbage", run);
}
