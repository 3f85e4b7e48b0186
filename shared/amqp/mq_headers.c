/* shared/amqp/mq_headers.c - a faithful, bounded translation of AMQP field values */
#include "shared/amqp/mq_headers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEPTH 8

static json_t *value_to_json(const amqp_field_value_t *v, int depth);

/* Strings from the wire may be anything: keep valid UTF-8, hex-escape the rest. */
static json_t *bytes_to_json(amqp_bytes_t b)
{
    json_t *s = b.len == 0                     ? json_string("")
                : memchr(b.bytes, '\0', b.len) ? NULL
                                               : json_stringn(b.bytes, b.len);
    char *hex;

    if (s != NULL)
        return s; /* NUL is refused too: PostgreSQL's jsonb cannot store it */
    hex = malloc(b.len * 2 + 5);
    if (hex == NULL)
        return json_null();
    strcpy(hex, "hex:");
    for (size_t i = 0; i < b.len; i++)
        snprintf(hex + 4 + 2 * i, 3, "%02x", ((const unsigned char *)b.bytes)[i]);
    s = json_string(hex);
    free(hex);
    return s;
}

static json_t *timestamp_to_json(uint64_t secs)
{
    time_t t = (time_t)secs;
    struct tm tm;
    char buf[32];

    if (gmtime_r(&t, &tm) == NULL)
        return json_integer((json_int_t)secs);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

static json_t *table_to_json(const amqp_table_t *t, int depth)
{
    json_t *o = json_object();

    if (depth > MAX_DEPTH)
        return o;
    for (int i = 0; i < t->num_entries; i++) {
        char key[256];
        size_t n = t->entries[i].key.len < sizeof key - 1 ? t->entries[i].key.len : sizeof key - 1;

        memcpy(key, t->entries[i].key.bytes, n);
        key[n] = '\0';
        if (memchr(key, '\0', n) != NULL)
            continue; /* a key that is not text cannot be a JSON member name */
        /* refused (and the value freed) when the key is not UTF-8 */
        (void)json_object_set_new(o, key, value_to_json(&t->entries[i].value, depth + 1));
    }
    return o;
}

bool mq_field_int(const amqp_field_value_t *v, int64_t *out)
{
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8:
        *out = v->value.i8;
        return true;
    case AMQP_FIELD_KIND_U8:
        *out = v->value.u8;
        return true;
    case AMQP_FIELD_KIND_I16:
        *out = v->value.i16;
        return true;
    case AMQP_FIELD_KIND_U16:
        *out = v->value.u16;
        return true;
    case AMQP_FIELD_KIND_I32:
        *out = v->value.i32;
        return true;
    case AMQP_FIELD_KIND_U32:
        *out = v->value.u32;
        return true;
    case AMQP_FIELD_KIND_I64:
        *out = v->value.i64;
        return true;
    case AMQP_FIELD_KIND_U64:
        *out = (int64_t)v->value.u64;
        return true;
    default:
        return false;
    }
}

static json_t *value_to_json(const amqp_field_value_t *v, int depth)
{
    int64_t n;

    if (depth > MAX_DEPTH)
        return json_null();
    if (mq_field_int(v, &n))
        return json_integer((json_int_t)n);
    switch (v->kind) {
    case AMQP_FIELD_KIND_BOOLEAN:
        return json_boolean(v->value.boolean);
    case AMQP_FIELD_KIND_F32:
        return json_real(v->value.f32);
    case AMQP_FIELD_KIND_F64:
        return json_real(v->value.f64);
    case AMQP_FIELD_KIND_DECIMAL:
        return json_integer(v->value.decimal.value);
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
        return bytes_to_json(v->value.bytes);
    case AMQP_FIELD_KIND_TIMESTAMP:
        return timestamp_to_json(v->value.u64);
    case AMQP_FIELD_KIND_TABLE:
        return table_to_json(&v->value.table, depth);
    case AMQP_FIELD_KIND_ARRAY: {
        json_t *a = json_array();
        for (int i = 0; i < v->value.array.num_entries; i++)
            json_array_append_new(a, value_to_json(&v->value.array.entries[i], depth + 1));
        return a;
    }
    case AMQP_FIELD_KIND_VOID:
    default:
        return json_null();
    }
}

json_t *mq_table_to_json(const amqp_table_t *t)
{
    return table_to_json(t, 0);
}

static void copy_member(json_t *dst, const char *to, const json_t *src, const char *from)
{
    json_t *v = json_object_get(src, from); /* borrowed */

    json_object_set(dst, to, v != NULL ? v : json_null());
}

json_t *mq_x_death(const json_t *headers)
{
    const json_t *deaths = json_object_get(headers, "x-death");
    json_t *out = json_array();
    size_t i;
    json_t *d;

    if (!json_is_array(deaths))
        return out;
    json_array_foreach(deaths, i, d)
    {
        json_t *e;

        if (!json_is_object(d))
            continue;
        e = json_object();
        copy_member(e, "queue", d, "queue");
        copy_member(e, "reason", d, "reason");
        copy_member(e, "count", d, "count");
        copy_member(e, "exchange", d, "exchange");
        copy_member(e, "routing_keys", d, "routing-keys");
        copy_member(e, "time", d, "time");
        json_array_append_new(out, e);
    }
    return out;
}
