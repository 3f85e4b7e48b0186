/* tests/unit/test_json_out.c - JSON written into a buffer: what jansson reads back is what was
 * written, commas in their places, every byte that must be escaped escaped */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shared/lib/json_out.h"
#include "tests/support/tcheck.h"

static void test_array_of_objects(void)
{
    json_out o = {0};
    json_t *back;
    char *text;

    json_out_open(&o, '[');
    for (int i = 0; i < 3; i++) {
        json_out_open(&o, '{');
        json_out_member(&o, "event_id", i == 1 ? "evt-\"1\"" : "evt");
        json_out_key(&o, "amount_cents");
        json_out_int(&o, i == 2 ? INT64_MIN : INT64_MAX);
        json_out_key(&o, "tags");
        json_out_open(&o, '[');
        json_out_str(&o, "a");
        json_out_int(&o, -7);
        json_out_open(&o, '{');
        json_out_close(&o, '}');
        json_out_close(&o, ']');
        json_out_close(&o, '}');
    }
    json_out_close(&o, ']');
    text = json_out_take(&o);
    CHECK_STR(text,
              "[{\"event_id\":\"evt\",\"amount_cents\":9223372036854775807,\"tags\":[\"a\",-7,"
              "{}]},{\"event_id\":\"evt-\\\"1\\\"\",\"amount_cents\":9223372036854775807,"
              "\"tags\":[\"a\",-7,{}]},{\"event_id\":\"evt\",\"amount_cents\":"
              "-9223372036854775808,\"tags\":[\"a\",-7,{}]}]");
    back = json_loads(text, 0, NULL);
    CHECK(json_is_array(back) && json_array_size(back) == 3);
    CHECK_STR(json_string_value(json_object_get(json_array_get(back, 1), "event_id")), "evt-\"1\"");
    json_decref(back);
    free(text);
    CHECK(o.buf == NULL && o.len == 0); /* empty again after take */
}

/* Every control byte, the quote and the backslash, UTF-8 and plain text, and a text longer
 * than the first buffer: jansson reads back the same bytes. */
static void test_strings_round_trip(void)
{
    char s[3000];
    size_t n = 0;
    json_out o = {0};
    json_t *back;
    char *text;

    for (int c = 1; c < 0x20; c++)
        s[n++] = (char)c;
    strcpy(s + n, "\"\\/ ação € {\"body\":\"x\"}");
    n += strlen(s + n);
    for (; n < sizeof s - 1; n++)
        s[n] = (char)('a' + n % 26);
    s[n] = '\0';
    json_out_open(&o, '{');
    json_out_key(&o, "k\"ey");
    json_out_str(&o, s);
    json_out_key(&o, "empty");
    json_out_str(&o, "");
    json_out_close(&o, '}');
    text = json_out_take(&o);
    CHECK(text != NULL && strstr(text, "\\u0001\\u0002") != NULL && strstr(text, "\\n") == NULL);
    back = json_loads(text, 0, NULL);
    CHECK(back != NULL);
    CHECK_STR(json_string_value(json_object_get(back, "k\"ey")), s);
    CHECK_STR(json_string_value(json_object_get(back, "empty")), "");
    json_decref(back);
    free(text);
}

int main(void)
{
    TRUN(test_array_of_objects);
    TRUN(test_strings_round_trip);
    return tcheck_summary("json_out");
}
