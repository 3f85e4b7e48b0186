/* shared/lib/json_out.c - JSON text written straight into a growing buffer */
#include "shared/lib/json_out.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(json_out *o, size_t more)
{
    size_t cap;
    char *nb;

    if (o->failed)
        return false;
    if (o->len + more + 1 <= o->cap)
        return true;
    cap = o->cap ? o->cap : 1024;
    while (cap < o->len + more + 1)
        cap *= 2;
    if ((nb = realloc(o->buf, cap)) == NULL) {
        o->failed = true;
        return false;
    }
    o->buf = nb;
    o->cap = cap;
    return true;
}

static void put(json_out *o, const char *s, size_t n)
{
    if (grow(o, n)) {
        memcpy(o->buf + o->len, s, n);
        o->len += n;
    }
}

/* A comma before a new member or element: unless the last thing written opened an
 * object or array, or was a member's colon. */
static void separate(json_out *o)
{
    char last = o->len ? o->buf[o->len - 1] : '{';

    if (last != '{' && last != '[' && last != ':')
        put(o, ",", 1);
}

void json_out_open(json_out *o, char bracket)
{
    separate(o);
    put(o, &bracket, 1);
}

void json_out_close(json_out *o, char bracket)
{
    put(o, &bracket, 1);
}

/* @s quoted, its quote, backslash and control bytes escaped */
static void put_quoted(json_out *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;

    put(o, "\"", 1);
    for (;;) {
        size_t run = 0;

        /* the plain run goes in one copy */
        while (p[run] >= 0x20 && p[run] != '"' && p[run] != '\\')
            run++;
        put(o, (const char *)p, run);
        p += run;
        if (*p == '\0')
            break;
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};

            put(o, esc, 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};

            put(o, esc, 6);
        }
        p++;
    }
    put(o, "\"", 1);
}

void json_out_key(json_out *o, const char *key)
{
    separate(o);
    put_quoted(o, key);
    put(o, ":", 1);
}

void json_out_str(json_out *o, const char *s)
{
    separate(o);
    put_quoted(o, s);
}

void json_out_member(json_out *o, const char *key, const char *value)
{
    json_out_key(o, key);
    put_quoted(o, value);
}

void json_out_int(json_out *o, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%" PRId64, v);

    separate(o);
    put(o, num, (size_t)n);
}

char *json_out_take(json_out *o)
{
    char *text = NULL;

    if (!o->failed && grow(o, 0)) {
        o->buf[o->len] = '\0';
        text = o->buf;
    } else {
        free(o->buf);
    }
    *o = (json_out){0};
    return text;
}
