/* tests/support/tlog.c - strict readers of text and JSON log lines */
#include "tests/support/tlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tcheck.h"

static const char *const leading[] = {"ts", "level", "program", "event"};

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One quoted value from just after its opening quote; the index after the closing one, or 0. */
static size_t quoted(const char *s, size_t i, size_t n, char *out, size_t *olen)
{
    size_t o = 0;

    while (i < n && s[i] != '"') {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c > 0x7e)
            return 0;
        if (c != '\\') {
            out[o++] = (char)c;
            i++;
            continue;
        }
        if (i + 1 >= n)
            return 0;
        switch (s[i + 1]) {
        case '"':
        case '\\':
            out[o++] = s[i + 1];
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        case 'x':
            if (i + 3 >= n || hex(s[i + 2]) < 0 || hex(s[i + 3]) < 0)
                return 0;
            out[o++] = (char)(hex(s[i + 2]) * 16 + hex(s[i + 3]));
            i += 2;
            break;
        default:
            return 0;
        }
        i += 2;
    }
    if (i >= n)
        return 0;
    *olen = o;
    return i + 1;
}

static json_t *parse_text(const char *s, size_t n, char *why, size_t len)
{
    json_t *obj = json_object();
    char *val = malloc(n + 1);
    size_t i = 0;
    int k = 0;

    if (val == NULL)
        abort();
    while (i < n) {
        char key[128];
        size_t kl = 0, vl = 0, start = i;

        while (i < n && key_char(s[i]) && kl < sizeof key - 1)
            key[kl++] = s[i++];
        key[kl] = '\0';
        if (kl == 0 || i >= n || s[i] != '=') {
            snprintf(why, len, "no key=value at byte %zu", start);
            goto bad;
        }
        if (k < 4 && strcmp(key, leading[k]) != 0) {
            snprintf(why, len, "field %d is %s, not %s", k + 1, key, leading[k]);
            goto bad;
        }
        i++;
        if (i < n && s[i] == '"') {
            size_t next = quoted(s, i + 1, n, val, &vl);

            if (next == 0) {
                snprintf(why, len, "bad quoted value of %s", key);
                goto bad;
            }
            i = next;
        } else {
            while (i < n && s[i] > 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\')
                val[vl++] = s[i++];
            if (vl == 0) {
                snprintf(why, len, "empty bare value of %s", key);
                goto bad;
            }
        }
        json_object_set_new(obj, key, json_stringn_nocheck(val, vl));
        k++;
        if (i < n) {
            if (s[i] != ' ' || i + 1 >= n) {
                snprintf(why, len, "byte %zu after %s is not one space before a field", i, key);
                goto bad;
            }
            i++;
        }
    }
    if (k < 4) {
        snprintf(why, len, "only %d fields", k);
        goto bad;
    }
    free(val);
    return obj;
bad:
    free(val);
    json_decref(obj);
    return NULL;
}

json_t *tlog_parse_line(const char *line, size_t n, bool json, char *why, size_t len)
{
    json_error_t e;
    json_t *obj;

    if (!json)
        return parse_text(line, n, why, len);
    obj = json_loadb(line, n, JSON_REJECT_DUPLICATES, &e);
    if (obj == NULL) {
        snprintf(why, len, "jansson: %s", e.text);
        return NULL;
    }
    if (!json_is_object(obj)) {
        snprintf(why, len, "not an object");
        json_decref(obj);
        return NULL;
    }
    for (int k = 0; k < 4; k++) {
        if (!json_is_string(json_object_get(obj, leading[k]))) {
            snprintf(why, len, "no string member %s", leading[k]);
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

/* The line on stderr with every byte outside printable ASCII as \xHH. */
static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c >= 0x20 && c < 0x7f && c != '\\')
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fputc('\n', stderr);
}

int tlog_check_lines(const char *log, bool json, const char *forbidden)
{
    int lines = 0;
    bool ok = true;

    for (const char *s = log; s != NULL && *s;) {
        const char *end = strchr(s, '\n');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        char why[160] = "";
        json_t *obj = tlog_parse_line(s, n, json, why, sizeof why);

        if (obj == NULL) {
            FAIL("log line %d does not parse as %s (%s):", lines + 1, json ? "JSON" : "text", why);
            print_escaped(s, n);
            ok = false;
        } else if (forbidden != NULL && json_object_get(obj, forbidden) != NULL) {
            FAIL("log line %d has a field %s:", lines + 1, forbidden);
            print_escaped(s, n);
            ok = false;
        }
        json_decref(obj);
        lines++;
        s = end ? end + 1 : NULL;
    }
    return ok ? lines : -1;
}

char *tlog_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL)
        return NULL;
    do {
        if (cap - len < 4096) {
            char *t = realloc(s, cap = cap * 2 + 4096 + 1);

            if (t == NULL)
                abort();
            s = t;
        }
        n = fread(s + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    fclose(f);
    s[len] = '\0';
    return s;
}

json_t *tlog_find_event(const char *log, bool json, const char *event)
{
    for (const char *s = log; s != NULL && *s;) {
        const char *end = strchr(s, '\n');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        char why[160];
        json_t *obj = tlog_parse_line(s, n, json, why, sizeof why);
        const char *ev = json_string_value(json_object_get(obj, "event"));

        if (ev != NULL && strcmp(ev, event) == 0)
            return obj;
        json_decref(obj);
        s = end ? end + 1 : NULL;
    }
    return NULL;
}

bool tlog_value_is(const json_t *line, const char *key, const char *want, size_t n)
{
    const json_t *v = json_object_get(line, key);

    if (!json_is_string(v)) {
        FAIL("log line has no string field %s", key);
        return false;
    }
    if (json_string_length(v) != n || memcmp(json_string_value(v), want, n) != 0) {
        FAIL("log field %s differs from what was sent:", key);
        print_escaped(json_string_value(v), json_string_length(v));
        print_escaped(want, n);
        return false;
    }
    return true;
}

json_t *tlog_check_escaped(const char *path, bool json, const char *event, const char *key,
                           const char *want, size_t n, const char *level)
{
    char *log = tlog_read(path);
    json_t *line = NULL;

    if (!CHECK(log != NULL))
        return NULL;
    CHECK(tlog_check_lines(log, json, "forged_line") > 0);
    line = tlog_find_event(log, json, event);
    if (CHECK(line != NULL)) {
        tlog_value_is(line, key, want, n);
        CHECK_STR(json_string_value(json_object_get(line, "level")), level);
    }
    free(log);
    return line;
}
