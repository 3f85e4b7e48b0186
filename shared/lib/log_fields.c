/*
 * shared/lib/log_fields.c - the format string of a log call is the code's own text
 *
 * It alone says where a field starts, where its key ends and whether its value
 * is quoted. What a conversion (%s, %d, ...) produces is data: it is copied
 * into the current value as raw bytes, never scanned for spaces, quotes or '='.
 * So a request path or a message_id from the wire cannot start a field.
 */
#include "shared/lib/log_fields.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

typedef enum walk_state { W_BETWEEN, W_KEY, W_BARE, W_QUOTED } walk_state;

/* The next field of @r, or @dropped when none is left (parsed and thrown away, so the
 * arguments stay in step). */
static log_field *field_open(log_rec *r, log_field *dropped)
{
    log_field *f = dropped;

    if (r->n == LOG_FIELDS_MAX)
        r->cut = true;
    else
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

/* A conversion's flags, width, precision and length, rebuilt as a spec for snprintf(). */
typedef struct conv_spec {
    char text[48];
    size_t k;
    size_t k_len; /* where the length modifier starts in @text */
    int lng;      /* 'H' hh, 'h', 'l', 'q' ll, 'j', 'z', 't', 'L'; 0 for none */
    int prec;     /* -1: none */
} conv_spec;

/* parse_spec - read @fmt (just after its '%') up to the conversion letter, which it returns. */
static const char *parse_spec(const char *fmt, va_list *ap, conv_spec *c)
{
    c->k = 0;
    c->lng = 0;
    c->prec = -1;
    c->text[c->k++] = '%';
    while (*fmt != '\0' && strchr("-+ #0'", *fmt) != NULL && c->k < 8)
        c->text[c->k++] = *fmt++;
    if (*fmt == '*') {
        c->k += (size_t)snprintf(c->text + c->k, sizeof c->text - c->k, "%d", va_arg(*ap, int));
        fmt++;
    } else {
        while (*fmt >= '0' && *fmt <= '9' && c->k < 20)
            c->text[c->k++] = *fmt++;
    }
    if (*fmt == '.') {
        fmt++;
        if (*fmt == '*') {
            c->prec = va_arg(*ap, int);
            fmt++;
        } else {
            c->prec = 0;
            while (*fmt >= '0' && *fmt <= '9')
                c->prec = c->prec * 10 + (*fmt++ - '0');
        }
        if (c->prec >= 0)
            c->k += (size_t)snprintf(c->text + c->k, sizeof c->text - c->k, ".%d", c->prec);
    }
    c->k_len = c->k;
    if (*fmt == 'h' || *fmt == 'l') {
        c->lng = fmt[1] == fmt[0] ? (fmt[0] == 'h' ? 'H' : 'q') : fmt[0];
        c->text[c->k++] = *fmt++;
        if (c->lng == 'H' || c->lng == 'q')
            c->text[c->k++] = *fmt++;
    } else if (*fmt != '\0' && strchr("qjztL", *fmt) != NULL) {
        c->lng = *fmt;
        c->text[c->k++] = *fmt++;
    }
    c->text[c->k] = *fmt;
    c->text[c->k + 1] = '\0';
    return fmt;
}

/*
 * int_arg - the next integer argument, read as its length modifier says (the
 * types -Wformat checked at the call site) and widened for a %j conversion.
 */
static uintmax_t int_arg(int lng, bool is_signed, va_list *ap)
{
    switch (lng) {
    case 'H':
        return is_signed ? (uintmax_t)(signed char)va_arg(*ap, int)
                         : (unsigned char)va_arg(*ap, unsigned);
    case 'h':
        return is_signed ? (uintmax_t)(short)va_arg(*ap, int)
                         : (unsigned short)va_arg(*ap, unsigned);
    case 'l':
        return is_signed ? (uintmax_t)va_arg(*ap, long) : va_arg(*ap, unsigned long);
    case 'q':
        return is_signed ? (uintmax_t)va_arg(*ap, long long) : va_arg(*ap, unsigned long long);
    case 'j':
        return is_signed ? (uintmax_t)va_arg(*ap, intmax_t) : va_arg(*ap, uintmax_t);
    case 'z':
        return is_signed ? (uintmax_t)va_arg(*ap, ssize_t) : va_arg(*ap, size_t);
    case 't':
        return (uintmax_t)va_arg(*ap, ptrdiff_t);
    default:
        return is_signed ? (uintmax_t)va_arg(*ap, int) : va_arg(*ap, unsigned);
    }
}

/* format_number - a numeric or pointer conversion @conv into @out (@len bytes). */
static void format_number(char conv, const conv_spec *c, va_list *ap, char *out, size_t len)
{
    char spec[sizeof c->text];

    out[0] = '\0';
    if (strchr("diuoxX", conv) != NULL) {
        bool is_signed = conv == 'd' || conv == 'i';
        uintmax_t v = int_arg(c->lng, is_signed, ap);

        /* the flags, width and precision as written, then 'j' for the widened value */
        snprintf(spec, sizeof spec, "%.*sj%c", (int)c->k_len, c->text, conv);
        if (is_signed)
            snprintf(out, len, spec, (intmax_t)v);
        else
            snprintf(out, len, spec, v);
    } else if (strchr("eEfFgGaA", conv) != NULL) {
        if (c->lng == 'L')
            snprintf(out, len, c->text, va_arg(*ap, long double));
        else
            snprintf(out, len, c->text, va_arg(*ap, double));
    } else if (conv == 'p') {
        snprintf(out, len, c->text, va_arg(*ap, void *));
    }
}

/*
 * conversion - the conversion at @fmt (just after its '%') with the next
 * arguments of @ap: *@s and *@n are its bytes (a %s argument as it is, bounded
 * by the precision; anything else formatted into @out, @len bytes). Returns
 * the end of the conversion in @fmt.
 */
static const char *conversion(const char *fmt, va_list *ap, char *out, size_t len, const char **s,
                              size_t *n)
{
    conv_spec c;
    char conv;

    fmt = parse_spec(fmt, ap, &c);
    conv = *fmt;
    *s = out;
    *n = 0;
    switch (conv) {
    case '\0': /* -Wformat refuses a format that ends in '%' at the call site */
        return fmt;
    case 's': { /* data: not formatted, only bounded by the precision */
        const char *v = va_arg(*ap, const char *);

        if (v == NULL)
            v = "(null)";
        *s = v;
        *n = c.prec >= 0 ? strnlen(v, (size_t)c.prec) : strlen(v);
        return fmt + 1;
    }
    case 'c':
        out[0] = (char)va_arg(*ap, int);
        *n = 1;
        return fmt + 1;
    case 'n': /* writes nothing here; the argument is still consumed */
        (void)va_arg(*ap, void *);
        return fmt + 1;
    case '%':
        out[0] = '%';
        *n = 1;
        return fmt + 1;
    default:
        format_number(conv, &c, ap, out, len);
        *n = strlen(out);
        return fmt + 1;
    }
}

/* One state machine over the format, a little over 70 lines: its states read best side by side. */
void log_fields_split(log_rec *r, const char *fmt, va_list *ap)
{
    walk_state st = W_BETWEEN;
    log_field *f = NULL, dropped;
    char num[128];

    r->n = 0;
    r->used = 0;
    r->cut = false;
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
            f = field_open(r, &dropped);
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
