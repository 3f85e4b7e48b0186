/* tests/unit/test_retry.c - the attempt number read from x-attempt, and the attempt arithmetic */
#include <string.h>

#include "shared/config.h"
#include "tests/support/tcheck.h"
#include "worker/settle/retry.h"

/* Properties with one header @key of @kind holding @v (or no headers when @key is NULL). */
static amqp_basic_properties_t props_with(amqp_table_entry_t *e, const char *key, uint8_t kind,
                                          int64_t v)
{
    amqp_basic_properties_t p;

    memset(&p, 0, sizeof p);
    if (key == NULL)
        return p;
    memset(e, 0, sizeof *e);
    e->key = amqp_cstring_bytes(key);
    e->value.kind = kind;
    switch (kind) {
    case AMQP_FIELD_KIND_I8:
        e->value.value.i8 = (int8_t)v;
        break;
    case AMQP_FIELD_KIND_U16:
        e->value.value.u16 = (uint16_t)v;
        break;
    case AMQP_FIELD_KIND_I32:
        e->value.value.i32 = (int32_t)v;
        break;
    case AMQP_FIELD_KIND_I64:
        e->value.value.i64 = v;
        break;
    case AMQP_FIELD_KIND_U64:
        e->value.value.u64 = (uint64_t)v;
        break;
    default:
        e->value.value.bytes = amqp_cstring_bytes("3");
        break;
    }
    p._flags = AMQP_BASIC_HEADERS_FLAG;
    p.headers.num_entries = 1;
    p.headers.entries = e;
    return p;
}

static void test_attempt_from_header(void)
{
    amqp_table_entry_t e;
    amqp_basic_properties_t p;

    p = props_with(&e, NULL, 0, 0);
    CHECK_INT(retry_attempt(&p), 1); /* no headers: a first attempt */
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_I32, 3);
    CHECK_INT(retry_attempt(&p), 3);
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_I8, 2);
    CHECK_INT(retry_attempt(&p), 2);
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_U16, 7);
    CHECK_INT(retry_attempt(&p), 7);
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_I64, 1000);
    CHECK_INT(retry_attempt(&p), 1000); /* the upper bound is still an attempt */
}

static void test_attempt_out_of_range_is_one(void)
{
    amqp_table_entry_t e;
    amqp_basic_properties_t p;

    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_I32, 0);
    CHECK_INT(retry_attempt(&p), 1);
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_I32, -4);
    CHECK_INT(retry_attempt(&p), 1);
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_I64, 1001);
    CHECK_INT(retry_attempt(&p), 1);
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_U64, 1LL << 40);
    CHECK_INT(retry_attempt(&p), 1);
    p = props_with(&e, "x-attempt", AMQP_FIELD_KIND_UTF8, 0); /* "3" as text: not an integer */
    CHECK_INT(retry_attempt(&p), 1);
    p = props_with(&e, "x-death", AMQP_FIELD_KIND_I32, 5); /* never counted from x-death */
    CHECK_INT(retry_attempt(&p), 1);
    p = props_with(&e, "x-attempts", AMQP_FIELD_KIND_I32, 5); /* the whole name, not a prefix */
    CHECK_INT(retry_attempt(&p), 1);
}

static void test_exhausted_after_steps_plus_one(void)
{
    gw_config cfg;

    memset(&cfg, 0, sizeof cfg);
    cfg.retry_steps = 2;
    cfg.retry_delays_ms[0] = 1000;
    cfg.retry_delays_ms[1] = 5000;
    CHECK(!retry_exhausted(&cfg, 1));
    CHECK(!retry_exhausted(&cfg, 2));
    CHECK(retry_exhausted(&cfg, 3)); /* the first attempt and one after each step */
    CHECK(retry_exhausted(&cfg, 4)); /* a copy from before a shorter RETRY_DELAYS_MS */
    CHECK_INT(retry_delay_ms(&cfg, 1), 1000);
    CHECK_INT(retry_delay_ms(&cfg, 2), 5000);

    cfg.retry_steps = 0; /* no delay step at all: the first failure is the last */
    CHECK(retry_exhausted(&cfg, 1));
}

static void test_bytes_str_truncates(void)
{
    char out[4];

    retry_bytes_str(amqp_cstring_bytes("ab"), out, sizeof out);
    CHECK_STR(out, "ab");
    retry_bytes_str(amqp_cstring_bytes("abcdef"), out, sizeof out);
    CHECK_STR(out, "abc");
    retry_bytes_str(amqp_empty_bytes, out, sizeof out);
    CHECK_STR(out, "");
}

int main(void)
{
    TRUN(test_attempt_from_header);
    TRUN(test_attempt_out_of_range_is_one);
    TRUN(test_exhausted_after_steps_plus_one);
    TRUN(test_bytes_str_truncates);
    return tcheck_summary("retry");
}
