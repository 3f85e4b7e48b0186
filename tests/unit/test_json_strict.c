/* tests/unit/test_json_strict.c - what the API refuses as malformed (400) before validation */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shared/lib/json_strict.h"
#include "tests/support/tcheck.h"

/* Parse @len bytes of @buf; returns the result and frees the value. */
static gw_err parse_n(const char *buf, size_t len, int depth, char *why, size_t why_len)
{
    json_t *v = NULL;
    gw_err err;

    why[0] = '\0';
    err = json_strict_parse(buf, len, depth, &v, why, why_len);
    if (err == GW_OK && !CHECK(v != NULL))
        return err;
    if (err != GW_OK)
        CHECK(why[0] != '\0'); /* a refusal always says why */
    json_decref(v);
    return err;
}

static gw_err parse(const char *s)
{
    char why[200];

    return parse_n(s, strlen(s), JSON_STRICT_MAX_DEPTH, why, sizeof why);
}

#define EXPECT(text, want)                                                                         \
    do {                                                                                           \
        tcheck_context("%s", #text);                                                               \
        CHECK_INT(parse(text), want);                                                              \
        tcheck_context_clear();                                                                    \
    } while (0)

static void test_accepts_plain_json(void)
{
    EXPECT("{}", GW_OK);
    EXPECT("[]", GW_OK);
    EXPECT(" \n\t{\"a\": [1, 2.5, \"x\", true, null, {\"b\": {}}]}\r\n ", GW_OK);
    EXPECT("{\"name\": \"Jo\\u00e3o \\ud83d\\ude00\"}", GW_OK); /* escapes and a surrogate pair */
    EXPECT("{\"name\": \"Jo\xc3\xa3o \xf0\x9f\x98\x80\"}", GW_OK); /* the same as raw UTF-8 */
    EXPECT("{\"a\": 1, \"A\": 2}", GW_OK);                         /* names differ by case */
}

static void test_value_is_decoded(void)
{
    const char buf[] = "{\"a\":[1,2]}garbage-after-len";
    json_t *v = NULL;
    char why[100];

    /* @buf is not NUL-terminated: only @len bytes count */
    CHECK_INT(json_strict_parse(buf, 11, JSON_STRICT_MAX_DEPTH, &v, why, sizeof why), GW_OK);
    CHECK(json_is_object(v));
    CHECK_INT(json_array_size(json_object_get(v, "a")), 2);
    json_decref(v);
}

static void test_duplicate_keys(void)
{
    EXPECT("{\"a\": 1, \"a\": 1}", GW_ERR_INVALID);
    EXPECT("{\"a\": 1, \"b\": {\"c\": 1, \"c\": 2}}", GW_ERR_INVALID);
    EXPECT("{\"a\": 1, \"\\u0061\": 2}", GW_ERR_INVALID); /* the same name, escaped */
    EXPECT("[{\"x\": 1}, {\"x\": 2}]", GW_OK);            /* different objects */
}

static void test_nul(void)
{
    static const char raw[] = "{\"a\": \"x\0y\"}";
    static const char raw_outside[] = "{\"a\": 1}\0";
    char why[200];

    EXPECT("{\"a\": \"x\\u0000y\"}", GW_ERR_INVALID);
    EXPECT("{\"a\\u0000\": 1}", GW_ERR_INVALID); /* in a member name too */
    CHECK_INT(parse_n(raw, sizeof raw - 1, JSON_STRICT_MAX_DEPTH, why, sizeof why), GW_ERR_INVALID);
    CHECK_INT(parse_n(raw_outside, sizeof raw_outside - 1, JSON_STRICT_MAX_DEPTH, why, sizeof why),
              GW_ERR_INVALID);
}

static void test_invalid_utf8(void)
{
    EXPECT("{\"a\": \"\xc3\x28\"}", GW_ERR_INVALID);         /* bad continuation byte */
    EXPECT("{\"a\": \"\xc0\xaf\"}", GW_ERR_INVALID);         /* overlong "/" */
    EXPECT("{\"a\": \"\xed\xa0\x80\"}", GW_ERR_INVALID);     /* an encoded surrogate */
    EXPECT("{\"a\": \"\xf4\x90\x80\x80\"}", GW_ERR_INVALID); /* above U+10FFFF */
    EXPECT("{\"a\": \"\xff\"}", GW_ERR_INVALID);
    EXPECT("{\"a\": \"\xe2\x82\"}", GW_ERR_INVALID); /* truncated sequence */
    EXPECT("{\"\xc3\x28\": 1}", GW_ERR_INVALID);     /* in a member name */
    EXPECT("{\"a\": \"\\ud800\"}", GW_ERR_INVALID);  /* a lone surrogate escape */
}

/* @depth nested arrays around a 1, with an object in the middle when @mix. */
static char *nested(int depth, bool mix)
{
    char *s = malloc((size_t)depth * 8 + 16);
    size_t n = 0;

    for (int i = 0; i < depth; i++) {
        if (mix && i % 2 == 1) {
            memcpy(s + n, "{\"k\":", 5);
            n += 5;
        } else {
            s[n++] = '[';
        }
    }
    s[n++] = '1';
    for (int i = depth - 1; i >= 0; i--)
        s[n++] = (mix && i % 2 == 1) ? '}' : ']';
    s[n] = '\0';
    return s;
}

static void test_depth(void)
{
    char why[200];

    for (int mix = 0; mix < 2; mix++) {
        char *ok = nested(16, mix), *deep = nested(17, mix);

        tcheck_context("mix=%d depth 16", mix);
        CHECK_INT(parse_n(ok, strlen(ok), 16, why, sizeof why), GW_OK);
        tcheck_context("mix=%d depth 17", mix);
        CHECK_INT(parse_n(deep, strlen(deep), 16, why, sizeof why), GW_ERR_INVALID);
        CHECK_CONTAINS(why, "deeper");
        free(ok);
        free(deep);
    }
    tcheck_context_clear();
    /* brackets inside strings (even after an escaped quote) are not nesting */
    EXPECT("{\"a\": \"[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{\"}", GW_OK);
    EXPECT("{\"a\": \"\\\"[[[[[[[[[[[[[[[[[[[[\"}", GW_OK);
    EXPECT("{\"a\": \"\\\\\", \"b\": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}", GW_ERR_INVALID);
}

static void test_trailing_and_empty(void)
{
    char why[200];

    EXPECT("{} x", GW_ERR_INVALID);
    EXPECT("{}{}", GW_ERR_INVALID);
    EXPECT("{},", GW_ERR_INVALID);
    EXPECT("[1] ]", GW_ERR_INVALID);
    EXPECT("", GW_ERR_INVALID);
    EXPECT("   ", GW_ERR_INVALID);
    EXPECT("{", GW_ERR_INVALID);
    EXPECT("{\"a\": 1,}", GW_ERR_INVALID); /* trailing comma */
    EXPECT("{'a': 1}", GW_ERR_INVALID);
    EXPECT("{\"a\": NaN}", GW_ERR_INVALID);
    CHECK_INT(parse_n("", 0, JSON_STRICT_MAX_DEPTH, why, sizeof why), GW_ERR_INVALID);
    CHECK_CONTAINS(why, "empty");
}

int main(void)
{
    TRUN(test_accepts_plain_json);
    TRUN(test_value_is_decoded);
    TRUN(test_duplicate_keys);
    TRUN(test_nul);
    TRUN(test_invalid_utf8);
    TRUN(test_depth);
    TRUN(test_trailing_and_empty);
    return tcheck_summary("test_json_strict");
}
