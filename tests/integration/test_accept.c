/*
 * tests/integration/test_accept.c - POST /v1/payments against openapi/payments.yaml
 *
 * Every row of the outcome table, the authentication rules, GET of a payment,
 * the outbox row, health and metrics, a request in flight and back-pressure.
 * A fresh database and real payments-api processes on port 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shared/lib/canon.h"
#include "shared/payment.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"

static tdb *db;
static tapi api;
static int accepted; /* what paygw_api_accepted_total must say at the end */
static int replayed;

/* The single value @sql returns on the test's database equals @want (NULL: SQL NULL or no row). */
#define value_is(sql, want) CHECK_SQL_STR(db, (sql), (want))

static long long total_payments(void)
{
    return tdb_long(db, "SELECT count(*) FROM payments", NULL);
}

/* POST a standard payment; returns the status. */
static long post_payment(const tapi *a, const char *event_id, const char *payment_id,
                         thttp_resp *out)
{
    char *body = tapi_payment(event_id, payment_id);

    tapi_post(a, body, NULL, out);
    free(body);
    return out->status;
}

static void test_accept_and_replay(void)
{
    thttp_resp r, again;
    const char *reordered =
        "{\n  \"decided_at\" : \"2026-11-29T12:00:00Z\",\n"
        "  \"payer\": {\"document\": \"12345678909\", \"name\": \"Maria Silva\"},\n"
        "  \"payee\": {\"account\": \"1234-5\",   \"bank\": \"001\"},\n"
        "\t\"currency\":\"BRL\", \"amount_cents\": 15000, \"decision\": \"approved\",\n"
        "  \"method\": \"pix\", \"payment_id\": \"pay-1\", \"event_id\": \"evt-1\" }\n";

    post_payment(&api, "evt-1", "pay-1", &r);
    CHECK_ACCEPTED(&r, "evt-1", "pay-1", false);
    accepted++;
    CHECK_ROWS(db, "evt-1", 1);

    /* the same content, other key order and white space: a replay, nothing new */
    tapi_post(&api, reordered, NULL, &again);
    CHECK_ACCEPTED(&again, "evt-1", "pay-1", true);
    replayed++;
    CHECK_STR(again.body, r.body); /* the same body, byte for byte */
    CHECK_ROWS(db, "evt-1", 1);
    CHECK_INT(total_payments(), 1);
    thttp_resp_free(&again);

    /* and again, identical text */
    post_payment(&api, "evt-1", "pay-1", &again);
    CHECK_ACCEPTED(&again, "evt-1", "pay-1", true);
    replayed++;
    thttp_resp_free(&again);
    thttp_resp_free(&r);
}

static void test_key_reused(void)
{
    char *body = tapi_payment("evt-1", "pay-1");
    char *other = NULL;
    json_t *o = json_loads(body, 0, NULL);
    thttp_resp r;

    /* same event_id, another amount */
    json_object_set_new(o, "amount_cents", json_integer(15001));
    other = json_dumps(o, JSON_COMPACT);
    tapi_post(&api, other, NULL, &r);
    CHECK_PROBLEM(&r, 422, "idempotency-key-reused");
    thttp_resp_free(&r);
    free(other);

    /* an optional member added is other content too */
    json_object_set_new(o, "amount_cents", json_integer(15000));
    json_object_del(o, "payer");
    other = json_dumps(o, JSON_COMPACT);
    tapi_post(&api, other, NULL, &r);
    CHECK_PROBLEM(&r, 422, "idempotency-key-reused");
    thttp_resp_free(&r);

    CHECK_ROWS(db, "evt-1", 1);
    CHECK_INT(tdb_long(db, "SELECT amount_cents FROM payments WHERE event_id = 'evt-1'", NULL),
              15000);
    free(other);
    free(body);
    json_decref(o);
}

static void test_payment_already_decided(void)
{
    thttp_resp r;

    post_payment(&api, "evt-2", "pay-1", &r);
    CHECK_PROBLEM(&r, 409, "payment-already-decided");
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-2", 0);
    value_is("SELECT event_id FROM payments WHERE payment_id = 'pay-1'", "evt-1");
}

/* POST @len bytes; expect a problem with @status and @slug and nothing written. */
static void expect_refused_at(int line, const char *what, const char *body, size_t len,
                              const char *const *extra, long status, const char *slug)
{
    long long before = total_payments();
    thttp_resp r;

    tcheck_context("line %d: %s", line, what);
    tapi_post_n(&api, body, len, extra, &r);
    CHECK_PROBLEM(&r, status, slug);
    CHECK_INT(total_payments(), before);
    tcheck_context_clear();
    thttp_resp_free(&r);
}
#define expect_refused(what, body, len, extra, status, slug)                                       \
    expect_refused_at(__LINE__, (what), (body), (len), (extra), (status), (slug))

/* A valid payment with @name as payer.name, spliced in as raw bytes. */
static char *with_raw_name(const char *event_id, const char *name, size_t *len)
{
    static const char fmt[] =
        "{\"event_id\":\"%s\",\"payment_id\":\"p-%s\",\"method\":\"pix\","
        "\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"account\":\"1\"},\"payer\":{\"name\":\"%s\"}}";
    char *s = malloc(strlen(fmt) + 2 * strlen(event_id) + strlen(name) + 1);

    *len = (size_t)sprintf(s, fmt, event_id, event_id, name);
    return s;
}

static void test_malformed(void)
{
    static const char dup[] =
        "{\"event_id\":\"evt-dup\",\"event_id\":\"evt-dup\",\"payment_id\":\"p-dup\","
        "\"method\":\"pix\",\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"account\":\"1\"}}";
    static const char nested_dup[] =
        "{\"event_id\":\"evt-dup2\",\"payment_id\":\"p-dup2\",\"method\":\"pix\","
        "\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"bank\":\"002\",\"account\":\"1\"}}";
    static const struct {
        const char *what, *body;
    } bad[] = {
        {"not JSON", "hello"},
        {"truncated JSON", "{\"event_id\":"},
        {"empty body", ""},
        {"an empty array", "[]"},
        {"a string", "\"evt\""},
        {"a number", "42"},
        {"null", "null"},
        {"duplicate keys", dup},
        {"duplicate nested keys", nested_dup},
        {"trailing garbage", "{} {}"},
    };
    /* a payer name of these bytes; nul: its X becomes a raw NUL byte inside the string */
    static const struct {
        const char *what, *event_id, *name;
        bool nul;
    } names[] = {
        {"invalid UTF-8", "evt-utf8", "Jo\xc3\x28o", false},
        {"overlong UTF-8", "evt-overlong", "\xc0\xaf", false},
        {"an escaped U+0000", "evt-u0000", "Maria\\u0000Silva", false},
        {"a raw NUL byte", "evt-nul", "MariaXSilva", true},
    };
    char *body, *array;
    size_t len;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_refused(bad[i].what, bad[i].body, strlen(bad[i].body), NULL, 400,
                       "malformed-request");

    body = tapi_payment("evt-arr", "pay-arr");
    array = malloc(strlen(body) + 3);
    sprintf(array, "[%s]", body);
    expect_refused("a payment in an array", array, strlen(array), NULL, 400, "malformed-request");
    free(array);
    free(body);

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        body = with_raw_name(names[i].event_id, names[i].name, &len);
        if (names[i].nul)
            *strchr(body, 'X') = '\0';
        expect_refused(names[i].what, body, len, NULL, 400, "malformed-request");
        free(body);
    }
    {
        char deep[64] = "";
        for (int i = 0; i < 17; i++)
            strcat(deep, "[");
        for (int i = 0; i < 17; i++)
            strcat(deep, "]");
        expect_refused("nesting 17 deep", deep, strlen(deep), NULL, 400, "malformed-request");
    }

    /* the same valid body with proper UTF-8 is accepted: the refusals above were the bytes */
    {
        thttp_resp r;
        body = with_raw_name("evt-utf8-ok", "Jo\xc3\xa3o \xf0\x9f\x98\x80", &len);
        tapi_post_n(&api, body, len, NULL, &r);
        CHECK_ACCEPTED(&r, "evt-utf8-ok", "p-evt-utf8-ok", false);
        accepted++;
        thttp_resp_free(&r);
        free(body);
    }
}

static void test_media_type(void)
{
    static const char *const none[] = {"Content-Type:", NULL};
    static const char *const text[] = {"Content-Type: text/plain", NULL};
    static const char *const form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    static const char *const jsonx[] = {"Content-Type: application/jsonx", NULL};
    static const char *const charset[] = {"Content-Type: application/json; charset=utf-8", NULL};
    char *body = tapi_payment("evt-ct", "pay-ct");
    thttp_resp r;

    expect_refused("no Content-Type", body, strlen(body), none, 415, "unsupported-media-type");
    expect_refused("text/plain", body, strlen(body), text, 415, "unsupported-media-type");
    expect_refused("form", body, strlen(body), form, 415, "unsupported-media-type");
    expect_refused("application/jsonx", body, strlen(body), jsonx, 415, "unsupported-media-type");
    CHECK_ROWS(db, "evt-ct", 0);
    tapi_post(&api, body, charset, &r); /* parameters are fine */
    CHECK_ACCEPTED(&r, "evt-ct", "pay-ct", false);
    accepted++;
    thttp_resp_free(&r);
    free(body);
}

/* A valid payment padded to about @size bytes with white space. */
static char *big_body(const char *event_id, size_t size)
{
    char *p = tapi_payment(event_id, event_id);
    size_t plen = strlen(p);
    char *s = malloc(size + plen + 1);

    memcpy(s, p, plen - 1); /* without the closing brace */
    memset(s + plen - 1, ' ', size);
    s[plen - 1 + size] = '}';
    s[plen + size] = '\0';
    free(p);
    return s;
}

static void test_too_large(void)
{
    static const char *const expect100[] = {"Expect: 100-continue", NULL};
    char *body = big_body("evt-big", 70 * 1024);
    char *fits = big_body("evt-fits", 60 * 1024);
    char auth[128], url[128];
    const char *headers[] = {auth, "Content-Type: application/json", NULL};
    thttp_req req = {.method = "POST", .url = url, .headers = headers};
    thttp_resp r;

    snprintf(auth, sizeof auth, "Authorization: Bearer %s", TAPI_TOKEN);
    snprintf(url, sizeof url, "%s/v1/payments", api.url);

    /* with Content-Length: refused from the headers */
    expect_refused("70 KiB, Expect: 100-continue", body, strlen(body), expect100, 413,
                   "payload-too-large");

    /* chunked, no Content-Length: refused once the body passes 64 KiB */
    req.body = body;
    req.len = strlen(body);
    req.chunked = true;
    thttp_do(&req, &r);
    CHECK_PROBLEM(&r, 413, "payload-too-large");
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-big", 0);

    /* 60 KiB is under the limit, chunked or not */
    req.body = fits;
    req.len = strlen(fits);
    thttp_do(&req, &r);
    CHECK_ACCEPTED(&r, "evt-fits", "evt-fits", false);
    accepted++;
    thttp_resp_free(&r);
    free(body);
    free(fits);
}

/* A valid payment of exactly @size bytes. */
static char *sized_body(const char *event_id, size_t size)
{
    char *p = tapi_payment(event_id, event_id);
    size_t plen = strlen(p);
    char *s = big_body(event_id, size - plen);

    free(p);
    return s;
}

static void test_size_boundary(void)
{
    char *max = sized_body("evt-64k", 64 * 1024), *over = sized_body("evt-64k1", 64 * 1024 + 1);
    char auth[128], url[128];
    const char *headers[] = {auth, "Content-Type: application/json", NULL};
    thttp_req req = {.method = "POST", .url = url, .headers = headers, .chunked = true};
    thttp_resp r;

    CHECK_INT(strlen(max), 64 * 1024);
    CHECK_INT(strlen(over), 64 * 1024 + 1);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", TAPI_TOKEN);
    snprintf(url, sizeof url, "%s/v1/payments", api.url);
    /* 64 KiB exactly is not "over 64 KiB" */
    tapi_post(&api, max, NULL, &r);
    CHECK_ACCEPTED(&r, "evt-64k", "evt-64k", false);
    accepted++;
    thttp_resp_free(&r);
    req.body = max; /* chunked, the same bytes: a replay */
    req.len = strlen(max);
    thttp_do(&req, &r);
    CHECK_ACCEPTED(&r, "evt-64k", "evt-64k", true);
    replayed++;
    thttp_resp_free(&r);
    /* one byte more is */
    expect_refused("64 KiB + 1", over, strlen(over), NULL, 413, "payload-too-large");
    req.body = over;
    req.len = strlen(over);
    thttp_do(&req, &r);
    CHECK_PROBLEM(&r, 413, "payload-too-large");
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-64k1", 0);
    free(max);
    free(over);
}

static void test_too_large_without_expect(void)
{
    static const char *const no_expect[] = {"Expect:", NULL};
    char *body = big_body("evt-big2", 70 * 1024);
    thttp_resp r;

    /* a client that sends the whole body at once still gets its 413 */
    tapi_post(&api, body, no_expect, &r);
    CHECK_PROBLEM(&r, 413, "payload-too-large");
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-big2", 0);
    free(body);
}

static bool has_pointer(const thttp_resp *r, const char *pointer)
{
    json_t *errors = json_object_get(r->json, "errors");
    size_t i;
    json_t *e;

    json_array_foreach(errors, i, e)
    {
        if (json_is_string(json_object_get(e, "detail")) &&
            json_string_value(json_object_get(e, "pointer")) != NULL &&
            strcmp(json_string_value(json_object_get(e, "pointer")), pointer) == 0)
            return true;
    }
    return false;
}

static void test_validation_errors(void)
{
    static const char body[] =
        "{\"event_id\":\"evt-bad\",\"payment_id\":\"pay bad\",\"method\":\"boleto\","
        "\"decision\":\"approved\",\"amount_cents\":150.0,"
        "\"payee\":{\"bank\":\"1\",\"account\":\"1234-5\",\"extra\":true},"
        "\"payer\":{\"name\":\"x\",\"document\":\"123\"},\"decided_at\":\"2026-02-29T00:00:00Z\","
        "\"surplus\":1}";
    static const char *const want[] = {"/payment_id",     "/method",     "/amount_cents",
                                       "/currency",       "/payee/bank", "/payee/extra",
                                       "/payer/document", "/decided_at", "/surplus"};
    thttp_resp r;

    tapi_post(&api, body, NULL, &r);
    CHECK_PROBLEM(&r, 422, "validation-failed");
    if (CHECK(json_is_array(json_object_get(r.json, "errors")))) {
        CHECK_INT(json_array_size(json_object_get(r.json, "errors")), 9);
        for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
            tcheck_context("pointer %s", want[i]);
            CHECK(has_pointer(&r, want[i]));
        }
        tcheck_context_clear();
    }
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-bad", 0);
}

/*
 * Every value the validator accepts can be stored: a boundary that passes
 * validation but fails in PostgreSQL would be a 503 the client retries forever.
 */
static void test_boundaries_are_storable(void)
{
    static const char *const decided[] = {
        "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-15:59",
        "2026-06-30T23:59:60Z", "2028-02-29T00:00:00.123456789+15:59",
        "2026-11-29t12:00:00z", "2026-11-29T12:00:00+14:00",
    };
    static const char *const refused[] = {"0000-01-01T00:00:00Z", "2026-11-29T12:00:00+23:00",
                                          "2026-02-29T00:00:00Z"};
    char id64[65], emoji[141 * 4 + 1] = "", acc20[21];
    char *base_text = tapi_payment("x", "x");
    json_t *base = json_loads(base_text, 0, NULL);
    int n = 0;

    free(base_text);
    memset(id64, 'Z', 64);
    id64[64] = '\0';
    memset(acc20, '7', 20);
    acc20[20] = '\0';
    for (int i = 0; i < 140; i++)
        strcat(emoji, "\xf0\x9f\x98\x80");
    for (int k = 0; k < 12; k++) {
        json_t *o = json_deep_copy(base);
        char event[80], *text;
        thttp_resp r;

        snprintf(event, sizeof event, "evt-edge-%d", k);
        json_object_set_new(o, "event_id", json_string(event));
        json_object_set_new(o, "payment_id", json_string(event));
        switch (k) {
        case 0:
            json_object_set_new(o, "event_id", json_string(id64));
            json_object_set_new(o, "payment_id", json_string(id64));
            snprintf(event, sizeof event, "%s", id64);
            break;
        case 1:
            json_object_set_new(o, "amount_cents", json_integer(0)); /* accepted here */
            break;
        case 2:
            json_object_set_new(o, "amount_cents", json_integer(10000000000000LL));
            break;
        case 3:
            json_object_set_new(json_object_get(o, "payee"), "account", json_string(acc20));
            json_object_set_new(json_object_get(o, "payer"), "name", json_string(emoji));
            json_object_set_new(json_object_get(o, "payer"), "document",
                                json_string("12345678000195"));
            break;
        case 4:
            json_object_del(o, "payer");
            json_object_del(o, "decided_at");
            break;
        case 5:
            json_object_set_new(o, "method", json_string("ted"));
            json_object_set_new(o, "decision", json_string("refused"));
            break;
        default:
            json_object_set_new(o, "decided_at", json_string(decided[k - 6]));
            break;
        }
        text = json_dumps(o, JSON_COMPACT);
        tcheck_context("boundary case %d", k);
        tapi_post(&api, text, NULL, &r);
        if (!CHECK_INT(r.status, 202))
            fprintf(stderr, "    body: %s\n", r.body);
        else
            n++;
        tcheck_context_clear();
        thttp_resp_free(&r);
        free(text);
        json_decref(o);
    }
    accepted += n;
    for (size_t k = 0; k < sizeof refused / sizeof *refused; k++) {
        json_t *o = json_deep_copy(base);
        char *text;
        thttp_resp r;

        json_object_set_new(o, "event_id", json_string("evt-edge-bad"));
        json_object_set_new(o, "decided_at", json_string(refused[k]));
        text = json_dumps(o, JSON_COMPACT);
        tcheck_context("decided_at %s", refused[k]);
        tapi_post(&api, text, NULL, &r);
        CHECK_PROBLEM(&r, 422, "validation-failed");
        CHECK(has_pointer(&r, "/decided_at"));
        tcheck_context_clear();
        thttp_resp_free(&r);
        free(text);
        json_decref(o);
    }
    json_decref(base);
}

static void test_idempotency_key_header(void)
{
    static const char *const same[] = {"Idempotency-Key: evt-ik", NULL};
    static const char *const other[] = {"Idempotency-Key: evt-other", NULL};
    char *body = tapi_payment("evt-ik", "pay-ik");
    char *body2 = tapi_payment("evt-ik2", "pay-ik2");
    thttp_resp r;

    tapi_post(&api, body2, other, &r);
    CHECK_PROBLEM(&r, 422, "validation-failed");
    CHECK(has_pointer(&r, "/event_id"));
    CHECK_INT(json_array_size(json_object_get(r.json, "errors")), 1);
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-ik2", 0);

    tapi_post(&api, body, same, &r);
    CHECK_ACCEPTED(&r, "evt-ik", "pay-ik", false);
    accepted++;
    thttp_resp_free(&r);
    free(body);
    free(body2);
}

/* @method @path with "Authorization: @auth" (NULL: none). */
static void request_with(const char *method, const char *path, const char *auth, thttp_resp *out)
{
    char url[256], header[256];
    const char *headers[] = {header, "Content-Type: application/json", NULL};
    const char *body = strcmp(method, "POST") == 0 ? "{}" : NULL;

    snprintf(url, sizeof url, "%s%s", api.url, path);
    snprintf(header, sizeof header, "Authorization: %s", auth ? auth : "");
    if (auth == NULL)
        headers[0] = "Authorization:";
    thttp_request(method, url, headers, body, body ? strlen(body) : 0, out);
}

static void expect_401_at(int line, const char *method, const char *path, const char *auth)
{
    thttp_resp r;

    tcheck_context("line %d: %s %s with \"%s\"", line, method, path, auth ? auth : "(none)");
    request_with(method, path, auth, &r);
    CHECK_PROBLEM(&r, 401, "unauthorized");
    CHECK_STR(thttp_header(&r, "WWW-Authenticate"), "Bearer");
    tcheck_context_clear();
    thttp_resp_free(&r);
}
#define expect_401(m, p, a) expect_401_at(__LINE__, (m), (p), (a))

/* get_200 - GET @path of the shared API with no token into @r (thttp_resp_free()): a 200. */
static bool get_200_at(int line, const char *path, thttp_resp *r)
{
    thttp_get(api.url, path, NULL, r);
    return tcheck_int(__FILE__, line, path, r->status, 200);
}
#define get_200(path, r) get_200_at(__LINE__, (path), (r))

static void test_authentication(void)
{
    static const char api_auth[] = "Bearer " TAPI_TOKEN;
    static const char admin_auth[] = "Bearer " TAPI_ADMIN_TOKEN;
    static const char *const open_paths[] = {"/healthz", "/readyz", "/metrics"};
    char prefix[64];
    thttp_resp r;

    snprintf(prefix, sizeof prefix, "Bearer %.*s", (int)strlen(TAPI_TOKEN) - 1, TAPI_TOKEN);
    expect_401("POST", "/v1/payments", NULL);
    expect_401("GET", "/v1/payments/pay-1", NULL);
    expect_401("POST", "/v1/payments", "Bearer wrong-token-0123456789abcdef");
    expect_401("POST", "/v1/payments", prefix);              /* a prefix is not the token */
    expect_401("POST", "/v1/payments", "Basic " TAPI_TOKEN); /* another scheme */
    expect_401("POST", "/v1/payments", TAPI_TOKEN);          /* no scheme */
    expect_401("POST", "/v1/payments", admin_auth);          /* the admin token never opens /v1 */
    expect_401("GET", "/v1/payments/pay-1", admin_auth);
    expect_401("GET", "/admin/dlq", api_auth); /* the API token never opens /admin */
    expect_401("POST", "/admin/dlq/drain", api_auth);
    expect_401("GET", "/admin/anything", api_auth);
    expect_401("GET", "/admin/anything", NULL);

    request_with("GET", "/admin/anything", admin_auth, &r);
    CHECK(r.status != 401 && r.status != 0);
    thttp_resp_free(&r);
    request_with("GET", "/v1/payments/pay-1", api_auth, &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);

    /* health and metrics need no token */
    for (size_t i = 0; i < sizeof open_paths / sizeof open_paths[0]; i++) {
        get_200(open_paths[i], &r);
        thttp_resp_free(&r);
    }
}

/* @method @path answers 405 method-not-allowed with "Allow: @allow". */
static void check_405_at(int line, const char *method, const char *path, const char *auth,
                         const char *allow)
{
    thttp_resp r;

    request_with(method, path, auth, &r);
    tcheck_context("line %d: %s %s", line, method, path);
    CHECK_PROBLEM(&r, 405, "method-not-allowed");
    CHECK_STR(thttp_header(&r, "Allow"), allow);
    tcheck_context_clear();
    thttp_resp_free(&r);
}

static void test_not_found_and_method(void)
{
    static const char api_auth[] = "Bearer " TAPI_TOKEN;
    /* GETs that find nothing: no route (without a token too), no payment, a bad id */
    static const struct {
        const char *path, *auth;
    } missing[] = {
        {"/nope", NULL},
        {"/v1/payments/pay-unknown", api_auth},
        {"/v1/payments/bad%20id", api_auth},
        {"/v1/elsewhere", api_auth},
    };
    thttp_resp r;

    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        request_with("GET", missing[i].path, missing[i].auth, &r);
        tcheck_context("GET %s", missing[i].path);
        CHECK_PROBLEM(&r, 404, "not-found");
        tcheck_context_clear();
        thttp_resp_free(&r);
    }

    check_405_at(__LINE__, "DELETE", "/v1/payments", api_auth, "POST");
    check_405_at(__LINE__, "GET", "/v1/payments", api_auth, "POST");
    check_405_at(__LINE__, "PUT", "/v1/payments/pay-1", api_auth, "GET");
    check_405_at(__LINE__, "POST", "/healthz", NULL, "GET");
    CHECK_INT(total_payments(), (long long)accepted);
}

static void test_get_payment(void)
{
    thttp_resp r;
    json_t *payee;
    const char *created, *updated;

    tapi_get(&api, "/v1/payments/pay-1", &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(thttp_header(&r, "Content-Type"), "application/json");
    CHECK_STR(thttp_json_str(&r, "payment_id"), "pay-1");
    CHECK_STR(thttp_json_str(&r, "event_id"), "evt-1");
    CHECK_STR(thttp_json_str(&r, "method"), "pix");
    CHECK_STR(thttp_json_str(&r, "decision"), "approved");
    CHECK(json_is_integer(json_object_get(r.json, "amount_cents")));
    CHECK_INT(json_integer_value(json_object_get(r.json, "amount_cents")), 15000);
    CHECK_STR(thttp_json_str(&r, "currency"), "BRL");
    payee = json_object_get(r.json, "payee");
    CHECK_STR(json_string_value(json_object_get(payee, "bank")), "001");
    CHECK_STR(json_string_value(json_object_get(payee, "account")), "1234-5");
    CHECK_STR(thttp_json_str(&r, "status"), "accepted");
    CHECK(json_is_integer(json_object_get(r.json, "attempts")));
    CHECK_INT(json_integer_value(json_object_get(r.json, "attempts")), 0);
    CHECK(json_is_null(json_object_get(r.json, "last_error")));
    CHECK(json_is_null(json_object_get(r.json, "settled_at")));
    created = thttp_json_str(&r, "created_at");
    updated = thttp_json_str(&r, "updated_at");
    CHECK(created != NULL && payment_rfc3339_valid(created));
    CHECK(updated != NULL && payment_rfc3339_valid(updated));
    thttp_resp_free(&r);
}

/*
 * @sent as event evt-@method / payment pay-@method with @method and @decision,
 * sent with the request @headers: a 202, and an outbox row that routes on
 * payment.@method.@decision and carries @trace (NULL: none).
 */
static void check_route(const json_t *sent, const char *method, const char *decision,
                        const char *const *headers, const char *trace)
{
    json_t *o = json_deep_copy(sent);
    char event_id[32], payment_id[32], key[64], sql[128];
    char *text;
    thttp_resp r;

    snprintf(event_id, sizeof event_id, "evt-%s", method);
    snprintf(payment_id, sizeof payment_id, "pay-%s", method);
    snprintf(key, sizeof key, "payment.%s.%s", method, decision);
    json_object_set_new(o, "event_id", json_string(event_id));
    json_object_set_new(o, "payment_id", json_string(payment_id));
    json_object_set_new(o, "method", json_string(method));
    json_object_set_new(o, "decision", json_string(decision));
    text = json_dumps(o, JSON_COMPACT);
    tapi_post(&api, text, headers, &r);
    CHECK_ACCEPTED(&r, event_id, payment_id, false);
    accepted++;
    thttp_resp_free(&r);
    snprintf(sql, sizeof sql, "SELECT routing_key FROM outbox WHERE event_id = '%s'", event_id);
    value_is(sql, key);
    snprintf(sql, sizeof sql, "SELECT traceparent FROM outbox WHERE event_id = '%s'", event_id);
    value_is(sql, trace);
    free(text);
    json_decref(o);
}

static void test_outbox_row(void)
{
    static const char trace[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const char *const with_trace[] = {"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-"
                                      "00f067aa0ba902b7-01",
                                      NULL};
    static const char *const bad_trace[] = {"traceparent: not-a-trace", NULL};
    char *body = tapi_payment("evt-1", "pay-1");
    json_t *sent = json_loads(body, 0, NULL);
    char *canon = canon_dump(sent);

    value_is("SELECT body FROM outbox WHERE event_id = 'evt-1'", canon);
    value_is("SELECT routing_key FROM outbox WHERE event_id = 'evt-1'", "payment.pix.approved");
    value_is("SELECT state || ':' || payment_id FROM outbox WHERE event_id = 'evt-1'",
             "pending:pay-1");
    value_is("SELECT traceparent FROM outbox WHERE event_id = 'evt-1'", NULL);
    /* the stored body decodes to what was sent */
    {
        char *stored = tdb_value(db, "SELECT body FROM outbox WHERE event_id = 'evt-1'", NULL);
        json_t *back = stored ? json_loads(stored, 0, NULL) : NULL;
        CHECK(json_equal(back, sent));
        json_decref(back);
        free(stored);
    }

    /* each method and decision routes on its own key; a traceparent travels along */
    check_route(sent, "card", "refused", with_trace, trace);
    check_route(sent, "ted", "approved", bad_trace, NULL);
    free(canon);
    json_decref(sent);
    free(body);
}

static void test_health_and_metrics(void)
{
    thttp_resp r;

    get_200("/healthz", &r);
    CHECK_STR(thttp_header(&r, "Content-Type"), "application/json");
    thttp_resp_free(&r);
    get_200("/readyz", &r);
    thttp_resp_free(&r);

    get_200("/metrics", &r);
    CHECK_CONTAINS(thttp_header(&r, "Content-Type"), "text/plain");
    CHECK_CONTAINS(r.body, "# TYPE paygw_api_accepted_total counter\n");
    CHECK_INT((long long)tapi_metric(r.body, "paygw_api_accepted_total"), accepted);
    CHECK_INT((long long)tapi_metric(r.body, "paygw_api_replayed_total"), replayed);
    CHECK((long long)tapi_metric(r.body, "paygw_api_rejected_total{status=\"422\"}") >= 4);
    CHECK((long long)tapi_metric(r.body, "paygw_api_rejected_total{status=\"401\"}") >= 10);
    CHECK(tapi_metric(r.body, "paygw_api_accept_duration_seconds_count") >= accepted);
    CHECK(tapi_metric(r.body, "paygw_outbox_backlog") >= 0);
    thttp_resp_free(&r);
    CHECK_INT(total_payments(), (long long)accepted);
}

/* --- a request in flight ----------------------------------------------------------- */

typedef struct slow_post {
    const tapi *a;
    const char *event_id, *payment_id;
    thttp_resp r;
} slow_post;

static void *slow_post_main(void *arg)
{
    slow_post *s = arg;

    post_payment(s->a, s->event_id, s->payment_id, &s->r);
    return NULL;
}

static void test_request_in_flight(void)
{
    static const char *const slow[] = {"GATEWAY_FAILPOINTS=api.before_commit=sleep=1500", NULL};
    tapi b;
    pthread_t t;
    thttp_resp r;

    if (!CHECK(tapi_start(&b, "accept-inflight", tdb_url(db), slow)))
        return;
    /* A first request holds its event from its BEGIN to its COMMIT, one round trip
     * (api/committer.c); a second one with the same event_id meanwhile is told so. The
     * test's session holds the event the way accept_batch() does (sql/0018), for as long
     * as it takes. */
    if (CHECK(tdb_exec(db, "BEGIN", NULL)) &&
        CHECK(
            tdb_exec(db, "SELECT pg_advisory_xact_lock(hashtextextended('evt-slow', 0))", NULL))) {
        post_payment(&b, "evt-slow", "pay-slow", &r);
        CHECK_PROBLEM(&r, 409, "request-in-flight");
        thttp_resp_free(&r);
    }
    CHECK(tdb_exec(db, "COMMIT", NULL));
    post_payment(&b, "evt-slow", "pay-slow", &r); /* held no longer: accepted */
    CHECK_ACCEPTED(&r, "evt-slow", "pay-slow", false);
    thttp_resp_free(&r);
    post_payment(&b, "evt-slow", "pay-slow", &r); /* now it is an ordinary replay */
    CHECK_ACCEPTED(&r, "evt-slow", "pay-slow", true);
    thttp_resp_free(&r);
    CHECK_ROWS(db, "evt-slow", 1);

    /* SIGTERM with a request in flight: it is finished and answered, then exit 0 */
    {
        slow_post last = {.a = &b, .event_id = "evt-term", .payment_id = "pay-term"};
        int sleeps = tproc_log_count(b.proc, "event=failpoint_sleep");
        long long deadline = tproc_now_ms() + 5000;

        pthread_create(&t, NULL, slow_post_main, &last);
        while (tproc_log_count(b.proc, "event=failpoint_sleep") == sleeps &&
               tproc_now_ms() < deadline)
            tproc_sleep_ms(10);
        CHECK(tproc_log_count(b.proc, "event=failpoint_sleep") > sleeps);
        tproc_signal(b.proc, SIGTERM);
        pthread_join(t, NULL);
        CHECK_ACCEPTED(&last.r, "evt-term", "pay-term", false);
        thttp_resp_free(&last.r);
        CHECK_ROWS(db, "evt-term", 1);
        CHECK_INT(tproc_wait_exit(b.proc, 10000), 0); /* within the contract's 10 s */
    }
    tapi_stop(&b);
}

/* --- back-pressure ------------------------------------------------------------------ */

/* Poll /metrics of @a until the backlog gauge is at least @n (it refreshes every second). */
static bool wait_backlog(const tapi *a, double n)
{
    long long deadline = tproc_now_ms() + 5000;
    double v = -1;
    thttp_resp r;

    while (tproc_now_ms() < deadline) {
        thttp_get(a->url, "/metrics", NULL, &r);
        v = tapi_metric(r.body, "paygw_outbox_backlog");
        thttp_resp_free(&r);
        if (v >= n)
            return true;
        tproc_sleep_ms(50);
    }
    return FAIL("paygw_outbox_backlog stayed at %g, want %g within 5 s", v, n);
}

static void test_backpressure(void)
{
    static const char *const small[] = {"OUTBOX_MAX_BACKLOG=3", NULL};
    tdb *bdb = tdb_create(true);
    tapi c;
    thttp_resp r;
    char event[32];

    if (!CHECK(bdb != NULL))
        return;
    if (!CHECK(tapi_start(&c, "accept-backlog", tdb_url(bdb), small))) {
        tdb_drop(bdb);
        return;
    }
    /* no relay runs: every accepted row stays pending */
    for (int n = 0; n < 3; n++) {
        snprintf(event, sizeof event, "evt-bp-%d", n);
        post_payment(&c, event, event, &r);
        CHECK_ACCEPTED(&r, event, event, false);
        thttp_resp_free(&r);
    }
    /* 3 pending is not above 3: still accepted */
    if (wait_backlog(&c, 3)) {
        post_payment(&c, "evt-bp-3", "evt-bp-3", &r);
        CHECK_ACCEPTED(&r, "evt-bp-3", "evt-bp-3", false);
        thttp_resp_free(&r);
    }
    /* 4 pending is: refused with back-pressure, nothing written */
    if (wait_backlog(&c, 4)) {
        post_payment(&c, "evt-bp-4", "evt-bp-4", &r);
        CHECK_PROBLEM(&r, 503, "outbox-backlog");
        CHECK_RETRY_AFTER(&r);
        thttp_resp_free(&r);
        CHECK_INT(tdb_long(bdb, "SELECT count(*) FROM payments WHERE event_id = 'evt-bp-4'", NULL),
                  0);
        /* a replay of an accepted event is refused too, or answered: never a new row */
        post_payment(&c, "evt-bp-0", "evt-bp-0", &r);
        CHECK(r.status == 503 || r.status == 202);
        thttp_resp_free(&r);
    }
    CHECK_INT(tdb_long(bdb, "SELECT count(*) FROM payments", NULL), 4);
    thttp_get(c.url, "/metrics", NULL, &r);
    CHECK(tapi_metric(r.body, "paygw_api_backpressure_total") >= 1);
    CHECK(tapi_metric(r.body, "paygw_outbox_oldest_pending_age_seconds") >= 0);
    thttp_resp_free(&r);
    /* GET still works: only accepts are refused */
    tapi_get(&c, "/v1/payments/evt-bp-0", &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    tapi_stop(&c);
    tdb_drop(bdb);
}

/* the tests that share one API */
static void with_api(void)
{
    TRUN(test_accept_and_replay);
    TRUN(test_key_reused);
    TRUN(test_payment_already_decided);
    TRUN(test_malformed);
    TRUN(test_media_type);
    TRUN(test_too_large);
    TRUN(test_too_large_without_expect);
    TRUN(test_size_boundary);
    TRUN(test_validation_errors);
    TRUN(test_boundaries_are_storable);
    TRUN(test_idempotency_key_header);
    TRUN(test_authentication);
    TRUN(test_not_found_and_method);
    TRUN(test_get_payment);
    TRUN(test_outbox_row);
    TRUN(test_health_and_metrics);
}

static void run(void)
{
    tapi_with(&api, "accept-api", db, with_api);
    TRUN(test_request_in_flight); /* these start APIs of their own */
    TRUN(test_backpressure);
}

int main(void)
{
    return tapi_main("test_accept", &db, NULL, NULL, run);
}
