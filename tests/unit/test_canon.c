/* tests/unit/test_canon.c - "same content" means the same decoded value */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shared/lib/canon.h"
#include "tests/support/tcheck.h"

static json_t *load(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);

    if (v == NULL)
        abort();
    return v;
}

/* The canonical text of @text, new (free()). */
static char *canon_of(const char *text)
{
    json_t *v = load(text);
    char *c = canon_dump(v);

    json_decref(v);
    return c;
}

static void fingerprint_of(const char *text, uint8_t out[CANON_FINGERPRINT_LEN])
{
    char *c = canon_of(text);

    canon_fingerprint(c, strlen(c), out);
    free(c);
}

static bool same_fingerprint(const char *a, const char *b)
{
    uint8_t fa[CANON_FINGERPRINT_LEN], fb[CANON_FINGERPRINT_LEN];

    fingerprint_of(a, fa);
    fingerprint_of(b, fb);
    return memcmp(fa, fb, sizeof fa) == 0;
}

static void test_canonical_text(void)
{
    char *c = canon_of("{ \"b\" : 1,\n \"a\" : { \"y\": [2, 1], \"x\": null } }");

    CHECK_STR(c, "{\"a\":{\"x\":null,\"y\":[2,1]},\"b\":1}"); /* sorted, compact, arrays kept */
    free(c);
    c = canon_of("{\"name\": \"Jo\xc3\xa3o\"}");
    CHECK_STR(c, "{\"name\":\"Jo\\u00E3o\"}"); /* ASCII escapes */
    free(c);
    c = canon_of("{\"name\": \"Jo\\u00e3o\"}");
    CHECK_STR(c, "{\"name\":\"Jo\\u00E3o\"}"); /* one spelling for one value */
    free(c);
}

static void test_same_content_same_fingerprint(void)
{
    const char *a = "{\"event_id\":\"e1\",\"payment_id\":\"p1\",\"amount_cents\":15000,"
                    "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"}}";
    const char *reordered = "{ \"payee\" : {\"account\":\"1234-5\", \"bank\":\"001\"},\n"
                            "  \"amount_cents\" : 15000, \"payment_id\":\"p1\",\t"
                            "\"event_id\" : \"e1\" }\n";
    const char *escaped = "{\"event_id\":\"\\u0065\\u0031\",\"payment_id\":\"p1\","
                          "\"amount_cents\":15000,\"payee\":{\"bank\":\"001\","
                          "\"account\":\"1234-5\"}}";

    CHECK(same_fingerprint(a, reordered));
    CHECK(same_fingerprint(a, escaped));
    CHECK(!same_fingerprint(a, "{\"event_id\":\"e1\",\"payment_id\":\"p1\",\"amount_cents\":15001,"
                               "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"}}"));
    CHECK(!same_fingerprint(a, "{\"event_id\":\"e1\",\"payment_id\":\"p1\",\"amount_cents\":15000,"
                               "\"payee\":{\"bank\":\"002\",\"account\":\"1234-5\"}}"));
    CHECK(!same_fingerprint(a, "{\"event_id\":\"e1\",\"payment_id\":\"p1\",\"amount_cents\":15000,"
                               "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"},\"x\":1}"));
    CHECK(!same_fingerprint("{\"a\":[1,2]}", "{\"a\":[2,1]}")); /* array order matters */
    CHECK(!same_fingerprint("{\"a\":\"1\"}", "{\"a\":1}"));     /* types matter */
}

static void test_fingerprint_is_blake2b_256(void)
{
    /* BLAKE2b-256 of the empty string (RFC 7693 parameters, 32-byte digest) */
    static const uint8_t empty[CANON_FINGERPRINT_LEN] = {
        0x0e, 0x57, 0x51, 0xc0, 0x26, 0xe5, 0x43, 0xb2, 0xe8, 0xab, 0x2e,
        0xb0, 0x60, 0x99, 0xda, 0xa1, 0xd1, 0xe5, 0xdf, 0x47, 0x77, 0x8f,
        0x77, 0x87, 0xfa, 0xab, 0x45, 0xcd, 0xf1, 0x2f, 0xe3, 0xa8};
    uint8_t out[CANON_FINGERPRINT_LEN];

    canon_fingerprint("", 0, out);
    CHECK(memcmp(out, empty, sizeof out) == 0);
    canon_fingerprint("{}", 2, out);
    CHECK(memcmp(out, empty, sizeof out) != 0);
}

int main(void)
{
    TRUN(test_canonical_text);
    TRUN(test_same_content_same_fingerprint);
    TRUN(test_fingerprint_is_blake2b_256);
    return tcheck_summary("test_canon");
}
