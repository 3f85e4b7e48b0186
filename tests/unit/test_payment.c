/* tests/unit/test_payment.c - every rule of the field table of openapi/payments.yaml */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shared/payment.h"
#include "tests/support/tcheck.h"

/* The contract's example: valid as it stands. A new reference. */
static json_t *valid(void)
{
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s, s:{s:s, s:s}, s:{s:s, s:s}, s:s}", "event_id", "evt-7f3a9c",
        "payment_id", "pay-1001", "method", "pix", "decision", "approved", "amount_cents",
        (json_int_t)15000, "currency", "BRL", "payee", "bank", "001", "account", "1234-5", "payer",
        "name", "Maria Silva", "document", "12345678909", "decided_at", "2026-11-29T12:00:00Z");
    if (o == NULL)
        abort();
    return o;
}

/* The body as parsed from JSON text, so reals and exponents are what jansson makes of them. */
static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &err);

    if (o == NULL) {
        fprintf(stderr, "bad test JSON: %s: %s\n", text, err.text);
        abort();
    }
    return o;
}

static char *repeat(const char *unit, int n)
{
    size_t ul = strlen(unit);
    char *s = malloc(ul * (size_t)n + 1);

    for (int i = 0; i < n; i++)
        memcpy(s + ul * (size_t)i, unit, ul);
    s[ul * (size_t)n] = '\0';
    return s;
}

static bool has_pointer(const field_errors *errs, const char *pointer)
{
    for (int i = 0; i < errs->n; i++)
        if (strcmp(errs->e[i].pointer, pointer) == 0)
            return true;
    return false;
}

static void print_errors(const field_errors *errs)
{
    for (int i = 0; i < errs->n; i++)
        fprintf(stderr, "    error %d: %s: %s\n", i, errs->e[i].pointer, errs->e[i].detail);
}

/* @root (stolen) validates without errors. */
static void expect_ok_at(int line, json_t *root, const char *what)
{
    payment p;
    field_errors errs;
    gw_err err = payment_validate(root, &p, &errs);

    tcheck_context("line %d: %s", line, what);
    if (!CHECK_INT(err, GW_OK) || !CHECK_INT(errs.n, 0))
        print_errors(&errs);
    tcheck_context_clear();
    json_decref(root);
}
#define expect_ok(root, what) expect_ok_at(__LINE__, (root), (what))

/* @root (stolen) fails with exactly one error, at @pointer, with a non-empty detail. */
static void expect_error_at(int line, json_t *root, const char *pointer, const char *what)
{
    payment p;
    field_errors errs;
    gw_err err = payment_validate(root, &p, &errs);

    tcheck_context("line %d: %s", line, what);
    CHECK_INT(err, GW_ERR_INVALID);
    if (CHECK_INT(errs.n, 1)) {
        CHECK_STR(errs.e[0].pointer, pointer);
        CHECK(errs.e[0].detail[0] != '\0');
    } else {
        print_errors(&errs);
    }
    tcheck_context_clear();
    json_decref(root);
}
#define expect_error(root, pointer, what) expect_error_at(__LINE__, (root), (pointer), (what))

/* valid() with member @key (of @obj: NULL top level, or "payee"/"payer") set to @v (stolen). */
static json_t *with(const char *obj, const char *key, json_t *v)
{
    json_t *root = valid();
    json_t *target = obj ? json_object_get(root, obj) : root;

    json_object_set_new(target, key, v);
    return root;
}

static json_t *without(const char *obj, const char *key)
{
    json_t *root = valid();
    json_t *target = obj ? json_object_get(root, obj) : root;

    json_object_del(target, key);
    return root;
}

static void test_valid_fills_payment(void)
{
    json_t *root = valid();
    payment p;
    field_errors errs;
    char rk[64];

    CHECK_INT(payment_validate(root, &p, &errs), GW_OK);
    CHECK_INT(errs.n, 0);
    CHECK_STR(p.event_id, "evt-7f3a9c");
    CHECK_STR(p.payment_id, "pay-1001");
    CHECK_STR(p.method, "pix");
    CHECK_STR(p.decision, "approved");
    CHECK_INT(p.amount_cents, 15000);
    CHECK_STR(p.currency, "BRL");
    CHECK_STR(p.payee_bank, "001");
    CHECK_STR(p.payee_account, "1234-5");
    CHECK_STR(p.decided_at, "2026-11-29T12:00:00Z");
    payment_routing_key(&p, rk, sizeof rk);
    CHECK_STR(rk, "payment.pix.approved");
    json_decref(root);

    /* payer and decided_at are optional */
    root = valid();
    json_object_del(root, "payer");
    json_object_del(root, "decided_at");
    CHECK_INT(payment_validate(root, &p, &errs), GW_OK);
    CHECK_STR(p.decided_at, "");
    json_decref(root);
}

static void test_ids(void)
{
    static const char *const keys[] = {"event_id", "payment_id"};
    char *s64 = repeat("a", 64), *s65 = repeat("b", 65);

    for (int k = 0; k < 2; k++) {
        char ptr[32];
        const char *key = keys[k];

        snprintf(ptr, sizeof ptr, "/%s", key);
        expect_ok(with(NULL, key, json_string(s64)), "64 characters");
        expect_ok(with(NULL, key, json_string("x")), "1 character");
        expect_ok(with(NULL, key, json_string("AZaz09._:-")), "every allowed character");
        expect_error(with(NULL, key, json_string(s65)), ptr, "65 characters");
        expect_error(with(NULL, key, json_string("")), ptr, "empty");
        expect_error(with(NULL, key, json_string("a b")), ptr, "space");
        expect_error(with(NULL, key, json_string("a/b")), ptr, "slash");
        expect_error(with(NULL, key, json_string("a+b")), ptr, "plus");
        expect_error(with(NULL, key, json_string("ação")), ptr, "non-ASCII letters");
        expect_error(with(NULL, key, json_string("a\tb")), ptr, "tab");
        expect_error(with(NULL, key, json_integer(1001)), ptr, "a number");
        expect_error(with(NULL, key, json_null()), ptr, "null");
        expect_error(without(NULL, key), ptr, "missing");
    }
    CHECK(payment_id_valid("abc", 3));
    CHECK(payment_id_valid(s64, 64));
    CHECK(!payment_id_valid(s65, 65));
    CHECK(!payment_id_valid("", 0));
    CHECK(!payment_id_valid("a\0b", 3)); /* an embedded NUL is not in the charset */
    free(s64);
    free(s65);
}

/* A value of one member as JSON text (NULL: the member removed), and what it is. */
typedef struct member_value {
    const char *json, *what;
} member_value;

/*
 * expect_member - valid() with member @key (of @obj, as in with()) set to each
 * of @good passes, and to each of @bad fails at its JSON pointer (both end at
 * a NULL what).
 */
static void expect_member(const char *obj, const char *key, const member_value *good,
                          const member_value *bad)
{
    char pointer[64];

    snprintf(pointer, sizeof pointer, "%s%s/%s", obj ? "/" : "", obj ? obj : "", key);
    for (; good->what != NULL; good++)
        expect_ok(with(obj, key, json_loads(good->json, JSON_DECODE_ANY, NULL)), good->what);
    for (; bad->what != NULL; bad++)
        expect_error(bad->json ? with(obj, key, json_loads(bad->json, JSON_DECODE_ANY, NULL))
                               : without(obj, key),
                     pointer, bad->what);
}

static void test_method_and_decision(void)
{
    static const member_value method_ok[] = {
        {"\"pix\"", "pix"}, {"\"ted\"", "ted"}, {"\"card\"", "card"}, {0}};
    static const member_value method_bad[] = {
        {"\"PIX\"", "upper case"}, {"\"boleto\"", "unknown method"}, {"\"\"", "empty method"},
        {"1", "a number"},         {NULL, "missing method"},         {0}};
    static const member_value decision_ok[] = {
        {"\"approved\"", "approved"}, {"\"refused\"", "refused"}, {0}};
    static const member_value decision_bad[] = {{"\"approve\"", "approve"},
                                                {"\"Approved\"", "capitalised"},
                                                {"true", "a boolean"},
                                                {NULL, "missing decision"},
                                                {0}};

    expect_member(NULL, "method", method_ok, method_bad);
    expect_member(NULL, "decision", decision_ok, decision_bad);
}

static void test_amount(void)
{
    payment p;
    field_errors errs;
    json_t *root;

    static const member_value good[] = {{"0", "0"}, {"1", "1"}, {"10000000000000", "10^13"}, {0}};
    static const member_value bad[] = {{"10000000000001", "10^13 + 1"},
                                       {"-1", "-1"},
                                       {"\"150\"", "\"150\""},
                                       {"null", "null"},
                                       {"true", "true"},
                                       {NULL, "missing"},
                                       {0}};

    expect_member(NULL, "amount_cents", good, bad);

    /* from JSON text: the literal decides, not the value */
    expect_error(parse("{\"event_id\":\"e\",\"payment_id\":\"p\",\"method\":\"pix\","
                       "\"decision\":\"approved\",\"amount_cents\":150.0,\"currency\":\"BRL\","
                       "\"payee\":{\"bank\":\"001\",\"account\":\"1\"}}"),
                 "/amount_cents", "150.0");
    expect_error(parse("{\"event_id\":\"e\",\"payment_id\":\"p\",\"method\":\"pix\","
                       "\"decision\":\"approved\",\"amount_cents\":1e2,\"currency\":\"BRL\","
                       "\"payee\":{\"bank\":\"001\",\"account\":\"1\"}}"),
                 "/amount_cents", "1e2");
    expect_error(parse("{\"event_id\":\"e\",\"payment_id\":\"p\",\"method\":\"pix\","
                       "\"decision\":\"approved\",\"amount_cents\":150.5,\"currency\":\"BRL\","
                       "\"payee\":{\"bank\":\"001\",\"account\":\"1\"}}"),
                 "/amount_cents", "150.5");
    root = parse("{\"event_id\":\"e\",\"payment_id\":\"p\",\"method\":\"pix\","
                 "\"decision\":\"approved\",\"amount_cents\":10000000000000,\"currency\":\"BRL\","
                 "\"payee\":{\"bank\":\"001\",\"account\":\"1\"}}");
    CHECK_INT(payment_validate(root, &p, &errs), GW_OK);
    CHECK_INT(p.amount_cents, 10000000000000LL);
    json_decref(root);
}

static void test_currency(void)
{
    static const member_value good[] = {{"\"BRL\"", "BRL"}, {0}};
    static const member_value bad[] = {{"\"brl\"", "lower case"}, {"\"USD\"", "USD"},
                                       {"\"\"", "empty"},         {"986", "ISO number"},
                                       {NULL, "missing"},         {0}};

    expect_member(NULL, "currency", good, bad);
}

static void test_payee(void)
{
    static const member_value bank_ok[] = {{"\"000\"", "bank 000"}, {"\"999\"", "bank 999"}, {0}};
    static const member_value bank_bad[] = {{"\"01\"", "2 digits"},
                                            {"\"0011\"", "4 digits"},
                                            {"\"00a\"", "a letter"},
                                            {"\"\"", "empty"},
                                            {"1", "a number"},
                                            {NULL, "missing bank"},
                                            {0}};
    static const member_value account_ok[] = {{"\"1\"", "1 character"},
                                              {"\"99999999999999999999\"", "20 characters"},
                                              {"\"AbC-09-z\"", "letters, digits, dash"},
                                              {0}};
    static const member_value account_bad[] = {{"\"999999999999999999999\"", "21 characters"},
                                               {"\"\"", "empty"},
                                               {"\"12 34\"", "space"},
                                               {"\"12_34\"", "underscore"},
                                               {"\"12.34\"", "dot"},
                                               {"\"çá\"", "non-ASCII"},
                                               {"12345", "a number"},
                                               {NULL, "missing account"},
                                               {0}};
    static const member_value payee_bad[] = {{NULL, "missing payee"},
                                             {"\"001/1234-5\"", "a string"},
                                             {"[]", "an array"},
                                             {"null", "null"},
                                             {0}};
    static const member_value none[] = {{0}};

    expect_member("payee", "bank", bank_ok, bank_bad);
    expect_member("payee", "account", account_ok, account_bad);
    expect_member(NULL, "payee", none, payee_bad);
}

static void test_payer(void)
{
    char *n140 = repeat("a", 140), *n141 = repeat("a", 141);
    char *u140 = repeat("ã", 140), *u141 = repeat("ã", 141); /* 2 bytes each */
    char *e140 = repeat("😀", 140);                           /* 4 bytes each */

    expect_ok(with("payer", "name", json_string(n140)), "name of 140 characters");
    expect_error(with("payer", "name", json_string(n141)), "/payer/name", "141 characters");
    expect_ok(with("payer", "name", json_string(u140)), "140 'ã' (280 bytes)");
    expect_error(with("payer", "name", json_string(u141)), "/payer/name", "141 'ã'");
    expect_ok(with("payer", "name", json_string(e140)), "140 emoji (560 bytes)");
    expect_error(with("payer", "name", json_integer(7)), "/payer/name", "a number");

    expect_ok(with("payer", "document", json_string("12345678909")), "11 digits (CPF)");
    expect_ok(with("payer", "document", json_string("12345678000195")), "14 digits (CNPJ)");
    expect_error(with("payer", "document", json_string("123456789012")), "/payer/document",
                 "12 digits");
    expect_error(with("payer", "document", json_string("1234567890")), "/payer/document",
                 "10 digits");
    expect_error(with("payer", "document", json_string("123456789012345")), "/payer/document",
                 "15 digits");
    expect_error(with("payer", "document", json_string("123.456.789-09")), "/payer/document",
                 "punctuation");
    expect_error(with("payer", "document", json_string("1234567890a")), "/payer/document",
                 "a letter");
    expect_error(with("payer", "document", json_integer(12345678909LL)), "/payer/document",
                 "a number");

    expect_ok(without(NULL, "payer"), "no payer");
    expect_error(with(NULL, "payer", json_string("Maria")), "/payer", "a string");
    expect_error(with(NULL, "payer", json_array()), "/payer", "an array");
    free(n140);
    free(n141);
    free(u140);
    free(u141);
    free(e140);
}

static void test_decided_at(void)
{
    static const char *const good[] = {
        "2026-11-29T12:00:00Z",      "2026-11-29T12:00:00.123Z",  "2026-11-29T12:00:00.123456789Z",
        "2026-11-29T12:00:00+03:00", "2026-11-29T12:00:00-03:00", "2026-11-29t12:00:00z",
        "2028-02-29T00:00:00Z",      "2000-02-29T00:00:00Z",      "2026-12-31T23:59:59Z",
        "2026-06-30T23:59:60Z",      "2026-01-31T00:00:00Z",      "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",      "2026-11-29T12:00:00+14:00", "2026-11-29T12:00:00-15:59",
    };
    static const char *const bad[] = {
        "2026-02-29T00:00:00Z", /* not a leap year */
        "2100-02-29T00:00:00Z", /* divisible by 100, not by 400 */
        "2026-04-31T00:00:00Z", /* April has 30 days */
        "2026-13-01T00:00:00Z",
        "2026-00-10T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-11-29T24:00:00Z",
        "2026-11-29T12:60:00Z",
        "2026-11-29T12:00:61Z",
        "2026-11-29",               /* a date only */
        "2026-11-29T12:00:00",      /* no offset */
        "2026-11-29T12:00Z",        /* no seconds */
        "2026-11-29T12:00:00.Z",    /* a dot without digits */
        "2026-11-29T12:00:00+0300", /* offset without colon */
        "2026-11-29T12:00:00+24:00",
        "2026-11-29T12:00:00Zjunk",
        "26-11-29T12:00:00Z",
        "2026/11/29T12:00:00Z",
        "not a date",
        "",
    };
    payment p;
    field_errors errs;
    json_t *root;

    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        tcheck_context("decided_at %s", good[i]);
        CHECK(payment_rfc3339_valid(good[i]));
        expect_ok(with(NULL, "decided_at", json_string(good[i])), good[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tcheck_context("decided_at \"%s\"", bad[i]);
        CHECK(!payment_rfc3339_valid(bad[i]));
        expect_error(with(NULL, "decided_at", json_string(bad[i])), "/decided_at", bad[i]);
    }
    tcheck_context_clear();
    expect_error(with(NULL, "decided_at", json_integer(1764417600)), "/decided_at", "a number");

    root = with(NULL, "decided_at", json_string("2026-11-29T12:00:00.5+03:00"));
    CHECK_INT(payment_validate(root, &p, &errs), GW_OK);
    CHECK_STR(p.decided_at, "2026-11-29T12:00:00.5+03:00"); /* kept as given */
    json_decref(root);
}

static void test_unknown_fields(void)
{
    expect_error(with(NULL, "extra", json_string("x")), "/extra", "unknown top-level field");
    expect_error(with("payee", "extra", json_string("x")), "/payee/extra", "unknown in payee");
    expect_error(with("payer", "extra", json_integer(1)), "/payer/extra", "unknown in payer");
    expect_error(with(NULL, "Event_ID", json_string("x")), "/Event_ID", "names are case-sensitive");
    /* RFC 6901 escapes in the pointer */
    expect_error(with(NULL, "a/b", json_true()), "/a~1b", "a slash in the name");
    expect_error(with(NULL, "m~n", json_true()), "/m~0n", "a tilde in the name");
}

static void test_many_errors_at_once(void)
{
    json_t *root = valid();
    payment p;
    field_errors errs;
    static const char *const want[] = {"/event_id",    "/amount_cents", "/currency",
                                       "/payee/extra", "/payee/bank",   "/payer/document",
                                       "/decided_at",  "/surplus",      "/method"};

    json_object_set_new(root, "event_id", json_string("bad id!"));
    json_object_del(root, "amount_cents");
    json_object_set_new(root, "currency", json_string("USD"));
    json_object_set_new(json_object_get(root, "payee"), "extra", json_true());
    json_object_set_new(json_object_get(root, "payee"), "bank", json_string("1"));
    json_object_set_new(json_object_get(root, "payer"), "document", json_string("1"));
    json_object_set_new(root, "decided_at", json_string("2026-02-29T00:00:00Z"));
    json_object_set_new(root, "surplus", json_null());
    json_object_set_new(root, "method", json_string("cash"));
    CHECK_INT(payment_validate(root, &p, &errs), GW_ERR_INVALID);
    CHECK_INT(errs.n, (long long)(sizeof want / sizeof *want));
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        tcheck_context("pointer %s", want[i]);
        CHECK(has_pointer(&errs, want[i]));
    }
    tcheck_context_clear();
    json_decref(root);

    /* an empty object names every required field */
    root = json_object();
    CHECK_INT(payment_validate(root, &p, &errs), GW_ERR_INVALID);
    CHECK_INT(errs.n, 7);
    CHECK(has_pointer(&errs, "/event_id"));
    CHECK(has_pointer(&errs, "/payment_id"));
    CHECK(has_pointer(&errs, "/method"));
    CHECK(has_pointer(&errs, "/decision"));
    CHECK(has_pointer(&errs, "/amount_cents"));
    CHECK(has_pointer(&errs, "/currency"));
    CHECK(has_pointer(&errs, "/payee"));
    json_decref(root);
}

static void test_error_cap(void)
{
    json_t *root = valid();
    payment p;
    field_errors errs;
    char key[16];

    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "x%03d", i);
        json_object_set_new(root, key, json_true());
    }
    CHECK_INT(payment_validate(root, &p, &errs), GW_ERR_INVALID);
    CHECK_INT(errs.n, PAYMENT_MAX_ERRORS); /* capped, never overflowing */
    json_decref(root);
}

static void test_not_an_object(void)
{
    json_t *values[] = {json_array(), json_string("x"), json_integer(1), json_null()};
    payment p;
    field_errors errs;

    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        tcheck_context("root value %zu", i);
        CHECK_INT(payment_validate(values[i], &p, &errs), GW_ERR_INVALID);
        if (CHECK_INT(errs.n, 1))
            CHECK_STR(errs.e[0].pointer, "");
        json_decref(values[i]);
    }
    tcheck_context_clear();
}

int main(void)
{
    TRUN(test_valid_fills_payment);
    TRUN(test_ids);
    TRUN(test_method_and_decision);
    TRUN(test_amount);
    TRUN(test_currency);
    TRUN(test_payee);
    TRUN(test_payer);
    TRUN(test_decided_at);
    TRUN(test_unknown_fields);
    TRUN(test_many_errors_at_once);
    TRUN(test_error_cap);
    TRUN(test_not_an_object);
    return tcheck_summary("test_payment");
}
