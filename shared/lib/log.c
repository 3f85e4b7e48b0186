/*
 * shared/lib/log.c - key=value or JSON lines on stderr, one per event whatever the bytes
 *
 * shared/lib/log_fields.c splits an event into fields, taking its structure
 * from the format's literal text only. Each value is escaped once, here, by
 * the writer of the line's format: so a request path or a message_id from the
 * wire cannot end a line, start a field, or make the JSON encoder refuse it.
 */
#include "shared/lib/log.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "shared/lib/log_fields.h"
#include "shared/lib/names.h"

/* Worst case of a text line: every raw byte as \xHH, plus keys, quotes and the head. */
#define LOG_LINE_MAX (4 * LOG_RAW_MAX + LOG_FIELDS_MAX * (LOG_KEY_MAX + 4) + 512)

static const char *log_program = "paygw";
static log_level log_threshold = LOG_INFO;
static log_format log_fmt = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_init(const char *program, log_level level, log_format format)
{
    log_program = program;
    log_threshold = level;
    log_fmt = format;
}

bool log_parse_level(const char *s, log_level *out)
{
    int i = NAMES_FIND(level_names, s);

    if (i >= 0)
        *out = (log_level)i;
    return i >= 0;
}

bool log_parse_format(const char *s, log_format *out)
{
    if (strcmp(s, "text") == 0)
        *out = LOG_FORMAT_TEXT;
    else if (strcmp(s, "json") == 0)
        *out = LOG_FORMAT_JSON;
    else
        return false;
    return true;
}

bool log_enabled(log_level level)
{
    return level >= log_threshold;
}

static void format_ts(char *buf, size_t len)
{
    struct timeval tv;
    struct tm tm;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));
}

/* --- text --------------------------------------------------------------------------- */

/* A value is written bare only when it is non-empty printable ASCII without '"' or '\\'. */
static bool needs_quotes(const char *s, size_t n)
{
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return true;
    }
    return false;
}

/*
 * text_escape - @s as the inside of a quoted value: printable ASCII as it
 * is but for \" and \\; \n, \r, \t; every other byte (controls, DEL, all
 * of UTF-8, valid or not) as \xHH. The line stays ASCII and one line.
 */
static size_t text_escape(char *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            out[o++] = '\\';
            out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c >= 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 0xf];
        } else {
            out[o++] = (char)c;
        }
    }
    return o;
}

/* A thread's held lines (log_hold()), written in one call by log_release(). */
#define HOLD_MAX 32768
static __thread char held[HOLD_MAX];
static __thread size_t held_len;
static __thread int holding;

static void flush_held(void)
{
    if (held_len > 0)
        fwrite(held, 1, held_len, stderr);
    held_len = 0;
}

/*
 * Put out the @len bytes of @line and a newline when @newline: at once, in one
 * call (stdio locks the stream for it), or kept with the thread's held lines.
 * A warning or an error never waits: it goes out with what was held before it.
 */
static void emit(log_level level, const char *line, size_t len, bool newline)
{
    size_t need = len + (newline ? 1 : 0);

    if (holding > 0 && level < LOG_WARN && need <= HOLD_MAX) {
        if (held_len + need > HOLD_MAX)
            flush_held();
        memcpy(held + held_len, line, len);
        held_len += len;
        if (newline)
            held[held_len++] = '\n';
        return;
    }
    flush_held();
    if (newline)
        fprintf(stderr, "%.*s\n", (int)len, line);
    else
        fwrite(line, 1, len, stderr);
}

void log_hold(void)
{
    holding++;
}

void log_release(void)
{
    if (holding > 0 && --holding == 0)
        flush_held();
}

static void write_text(const log_rec *r, const char *ts, log_level level, const char *event)
{
    char line[LOG_LINE_MAX];
    size_t o;

    o = (size_t)snprintf(line, 256, "ts=%s level=%s program=%s event=%s", ts, level_names[level],
                         log_program, event);
    if (o >= 256)
        o = 255;
    for (int i = 0; i < r->n; i++) {
        const log_field *f = &r->f[i];
        const char *v = r->raw + f->off;
        size_t kl = strlen(f->key);

        line[o++] = ' ';
        memcpy(line + o, f->key, kl);
        o += kl;
        line[o++] = '=';
        if (f->quoted || needs_quotes(v, f->len)) {
            line[o++] = '"';
            o += text_escape(line + o, v, f->len);
            line[o++] = '"';
        } else {
            memcpy(line + o, v, f->len);
            o += f->len;
        }
    }
    if (r->cut) {
        static const char cut[] = " log_truncated=true";

        memcpy(line + o, cut, sizeof cut - 1);
        o += sizeof cut - 1;
    }
    line[o++] = '\n';
    emit(level, line, o, false);
}

/* --- JSON --------------------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at @s (at most @n bytes), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, out of range or a surrogate */
    return len;
}

/* A JSON string of @s with every byte that is not part of valid UTF-8 as U+FFFD. */
static json_t *json_value(const char *s, size_t n)
{
    char buf[3 * LOG_VALUE_MAX];
    size_t o = 0;

    if (n > LOG_VALUE_MAX)
        n = LOG_VALUE_MAX;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len((const unsigned char *)s + i, n - i);

        if (len == 0) {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(buf + o, s + i, len);
            o += len;
            i += len;
        }
    }
    return json_stringn(buf, o);
}

static void write_json(const log_rec *r, const char *ts, log_level level, const char *event)
{
    json_t *obj = json_object();
    char *line = NULL;

    if (obj != NULL) {
        json_object_set_new(obj, "ts", json_string(ts)); /* steals each value */
        json_object_set_new(obj, "level", json_string(level_names[level]));
        json_object_set_new(obj, "program", json_value(log_program, strlen(log_program)));
        json_object_set_new(obj, "event", json_value(event, strlen(event)));
        for (int i = 0; i < r->n; i++) {
            const log_field *f = &r->f[i];

            if (json_object_get(obj, f->key) != NULL)
                continue; /* never let a field replace ts, level, program or event */
            json_object_set_new(obj, f->key, json_value(r->raw + f->off, f->len));
        }
        if (r->cut)
            json_object_set_new(obj, "log_truncated", json_true());
        line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
        json_decref(obj);
    }
    if (line == NULL) { /* out of memory: still one line that parses */
        flush_held();
        fprintf(stderr,
                "{\"ts\":\"%s\",\"level\":\"%s\",\"program\":\"paygw\",\"event\":\"log_failed\"}\n",
                ts, level_names[level]);
        return;
    }
    emit(level, line, strlen(line), true);
    free(line);
}

void log_event(log_level level, const char *event, const char *fmt, ...)
{
    char ts[64];
    log_rec r;
    va_list ap;

    if (!log_enabled(level))
        return;
    format_ts(ts, sizeof ts);
    va_start(ap, fmt);
    log_fields_split(&r, fmt, &ap);
    va_end(ap);
    if (log_fmt == LOG_FORMAT_JSON)
        write_json(&r, ts, level, event);
    else
        write_text(&r, ts, level, event);
}
