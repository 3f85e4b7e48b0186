/*
 * shared/lib/log.c - key=value or JSON lines on stderr, one per event whatever the bytes
 *
 * The format string of a call is the code's own text: it alone says where a
 * field starts, where its key ends and whether its value is quoted. What a
 * conversion (%s, %d, ...) produces is data: it is copied into the current
 * value as raw bytes, never scanned for spaces, quotes or '='. Each value is
 * escaped once, here, by the writer of its format: so a request path or a
 * message_id from the wire cannot end a line, start a field, or make the JSON
 * encoder refuse the line.
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

#define LOG_FIELDS_MAX 32
#define LOG_KEY_MAX    48
#define LOG_VALUE_MAX  1024 /* raw bytes of one value; more is cut */
#define LOG_RAW_MAX    4096 /* raw bytes of all values of one event */
/* Worst case of a text line: every raw byte as \xHH, plus keys, quotes and the head. */
#define LOG_LINE_MAX (4 * LOG_RAW_MAX + LOG_FIELDS_MAX * (LOG_KEY_MAX + 4) + 512)

static const char *log_program = "paygw";
static log_level log_threshold = LOG_INFO;
static log_format log_fmt = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/* One field of an event: its key and where its raw value lies in log_rec.raw. */
typedef struct log_field {
    char key[LOG_KEY_MAX];
    size_t off, len;
    bool quoted; /* the format put the value in double quotes */
} log_field;

/* One event split into fields. Lives on the caller's stack: no allocation on the way to a line. */
typedef struct log_rec {
    log_field f[LOG_FIELDS_MAX];
    int n;
    char raw[LOG_RAW_MAX];
    size_t used;
    bool cut; /* a value, a key or a field did not fit */
} log_rec;

typedef enum walk_state { W_BETWEEN, W_KEY, W_BARE, W_QUOTED } walk_state;

void log_init(const char *program, log_level level, log_format format)
{
    log_program = program;
    log_threshold = level;
    log_fmt = format;
}

bool log_parse_level(const char *s, log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (log_level)i;
            return true;
        }
    }
    return false;
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

/* --- splitting an event into fields ------------------------------------------------ */

static log_field *field_open(log_rec *r)
{
    log_field *f;

    if (r->n == LOG_FIELDS_MAX) {
        r->cut = true;
        return NULL;
    }
    f = &r->f[r->n++];
    f->key[0] = '\0';
    f->off = r->used;
    f->len = 0;
    f->quoted = false;
    return f;
}

/* Bytes of a key: only [A-Za-z0-9_.-], anything else becomes '_'. */
static void key_add(log_rec *r, log_field *f, const char *s, size_t n)
{
    size_t k = strlen(f->key);

    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-';

        if (k == LOG_KEY_MAX - 1) {
            r->cut = true;
            break;
        }
        f->key[k++] = ok ? c : '_';
    }
    f->key[k] = '\0';
}

static void value_add(log_rec *r, log_field *f, const char *s, size_t n)
{
    size_t room = LOG_RAW_MAX - r->used;

    if (f->len + n > LOG_VALUE_MAX) {
        n = LOG_VALUE_MAX - f->len;
        r->cut = true;
    }
    if (n > room) {
        n = room;
        r->cut = true;
    }
    memcpy(r->raw + r->used, s, n);
    r->used += n;
    f->len += n;
}

/* A field that ended in its key (a bare word, no '='): keep the word as the value of "msg". */
static void field_bare_word(log_rec *r, log_field *f)
{
    char word[LOG_KEY_MAX];

    memcpy(word, f->key, sizeof word);
    snprintf(f->key, sizeof f->key, "msg");
    value_add(r, f, word, strlen(word));
}

/*
 * conversion - format the conversion at @fmt (just after its '%') with the
 * next arguments of @ap into @out (@len bytes); the bytes written go to
 * *@n. Returns the end of the conversion in @fmt. The argument types are
 * the ones -Wformat checked against the format at the call site.
 */
static const char *conversion(const char *fmt, va_list *ap, char *out, size_t len, const char **s,
                              size_t *n)
{
    char spec[48];
    size_t k = 0;
    int lng = 0; /* 'H' hh, 'h', 'l', 'q' ll, 'j', 'z', 't', 'L' */
    int prec = -1;
    int w;

    spec[k++] = '%';
    while (*fmt != '\0' && strchr("-+ #0'", *fmt) != NULL && k < 8)
        spec[k++] = *fmt++;
    if (*fmt == '*') {
        w = va_arg(*ap, int);
        k += (size_t)snprintf(spec + k, sizeof spec - k, "%d", w);
        fmt++;
    } else {
        while (*fmt >= '0' && *fmt <= '9' && k < 20)
            spec[k++] = *fmt++;
    }
    if (*fmt == '.') {
        fmt++;
        if (*fmt == '*') {
            prec = va_arg(*ap, int);
            fmt++;
        } else {
            prec = 0;
            while (*fmt >= '0' && *fmt <= '9')
                prec = prec * 10 + (*fmt++ - '0');
        }
        if (prec >= 0)
            k += (size_t)snprintf(spec + k, sizeof spec - k, ".%d", prec);
    }
    switch (*fmt) { /* the length modifier: copied into @spec, remembered in @lng */
    case 'h':
    case 'l':
        lng = fmt[1] == fmt[0] ? (fmt[0] == 'h' ? 'H' : 'q') : fmt[0];
        spec[k++] = *fmt++;
        if (lng == 'H' || lng == 'q')
            spec[k++] = *fmt++;
        break;
    case 'q':
    case 'j':
    case 'z':
    case 't':
    case 'L':
        lng = *fmt;
        spec[k++] = *fmt++;
        break;
    default:
        break;
    }
    spec[k++] = *fmt;
    spec[k] = '\0';
    *s = out;
    *n = 0;
    switch (*fmt) {
    case 's': { /* data: not formatted, only bounded by the precision */
        const char *v = va_arg(*ap, const char *);

        if (v == NULL)
            v = "(null)";
        *s = v;
        *n = prec >= 0 ? strnlen(v, (size_t)prec) : strlen(v);
        return fmt + 1;
    }
    case 'c':
        out[0] = (char)va_arg(*ap, int);
        *n = 1;
        return fmt + 1;
    case 'd':
    case 'i':
        if (lng == 'l')
            snprintf(out, len, spec, va_arg(*ap, long));
        else if (lng == 'q')
            snprintf(out, len, spec, va_arg(*ap, long long));
        else if (lng == 'j')
            snprintf(out, len, spec, va_arg(*ap, intmax_t));
        else if (lng == 'z')
            snprintf(out, len, spec, va_arg(*ap, ssize_t));
        else if (lng == 't')
            snprintf(out, len, spec, va_arg(*ap, ptrdiff_t));
        else
            snprintf(out, len, spec, va_arg(*ap, int));
        break;
    case 'u':
    case 'o':
    case 'x':
    case 'X':
        if (lng == 'l')
            snprintf(out, len, spec, va_arg(*ap, unsigned long));
        else if (lng == 'q')
            snprintf(out, len, spec, va_arg(*ap, unsigned long long));
        else if (lng == 'j')
            snprintf(out, len, spec, va_arg(*ap, uintmax_t));
        else if (lng == 'z')
            snprintf(out, len, spec, va_arg(*ap, size_t));
        else if (lng == 't')
            snprintf(out, len, spec, va_arg(*ap, ptrdiff_t));
        else
            snprintf(out, len, spec, va_arg(*ap, unsigned));
        break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
    case 'a':
    case 'A':
        if (lng == 'L')
            snprintf(out, len, spec, va_arg(*ap, long double));
        else
            snprintf(out, len, spec, va_arg(*ap, double));
        break;
    case 'p':
        snprintf(out, len, spec, va_arg(*ap, void *));
        break;
    case 'n': /* writes nothing here; the argument is still consumed */
        (void)va_arg(*ap, void *);
        return fmt + 1;
    case '%':
        out[0] = '%';
        *n = 1;
        return fmt + 1;
    default: /* -Wformat refuses anything else at the call site */
        return *fmt ? fmt + 1 : fmt;
    }
    *n = strlen(out);
    return fmt + 1;
}

/*
 * split - walk @fmt: literal text builds keys and separates fields (a space
 * between fields, '=' after a key, '"' around a quoted value); what each
 * conversion produces is appended, as it is, to the current key or value.
 */
static void split(log_rec *r, const char *fmt, va_list *ap)
{
    walk_state st = W_BETWEEN;
    log_field *f = NULL, dropped;
    char num[128];

    while (*fmt) {
        const char *s = fmt;
        size_t n = 1;
        bool literal = *fmt != '%' || fmt[1] == '%';

        if (*fmt == '%')
            fmt = conversion(fmt + 1, ap, num, sizeof num, &s, &n);
        else
            fmt++;

        if (st == W_BETWEEN) {
            if (literal && *s == ' ')
                continue;
            f = field_open(r);
            if (f == NULL)
                f = &dropped; /* parsed and thrown away, so the arguments stay in step */
            f->key[0] = '\0';
            f->len = 0;
            st = W_KEY;
        }
        if (f == &dropped) {
            if (literal && *s == ' ' && st != W_QUOTED)
                st = W_BETWEEN;
            else if (literal && *s == '"')
                st = st == W_QUOTED ? W_BETWEEN : W_QUOTED;
            continue;
        }
        switch (st) {
        case W_KEY:
            if (literal && *s == '=') {
                if (f->key[0] == '\0')
                    key_add(r, f, "msg", 3);
                st = W_BARE;
                if (*fmt == '"') {
                    fmt++;
                    f->quoted = true;
                    st = W_QUOTED;
                }
            } else if (literal && *s == ' ') {
                field_bare_word(r, f);
                st = W_BETWEEN;
            } else {
                key_add(r, f, s, n);
            }
            break;
        case W_BARE:
            if (literal && *s == ' ')
                st = W_BETWEEN;
            else
                value_add(r, f, s, n);
            break;
        case W_QUOTED:
            if (literal && *s == '\\' && *fmt == '"') { /* \" in the format: a quote in the value */
                value_add(r, f, fmt, 1);
                fmt++;
            } else if (literal && *s == '"') {
                st = W_BETWEEN;
            } else {
                value_add(r, f, s, n);
            }
            break;
        case W_BETWEEN:
            break;
        }
    }
    if (st == W_KEY && f != &dropped)
        field_bare_word(r, f);
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
    fwrite(line, 1, o, stderr); /* one call: stdio locks the stream for the line */
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
        fprintf(stderr,
                "{\"ts\":\"%s\",\"level\":\"%s\",\"program\":\"paygw\",\"event\":\"log_failed\"}\n",
                ts, level_names[level]);
        return;
    }
    fprintf(stderr, "%s\n", line); /* one fprintf: stdio locks the stream for the line */
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
    r.n = 0;
    r.used = 0;
    r.cut = false;
    va_start(ap, fmt);
    split(&r, fmt, &ap);
    va_end(ap);
    if (log_fmt == LOG_FORMAT_JSON)
        write_json(&r, ts, level, event);
    else
        write_text(&r, ts, level, event);
}
