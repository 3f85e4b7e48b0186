/* shared/payment.c - the rules of a payment decision, in one place */
#include "shared/payment.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void add_error(field_errors *errs, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_error(field_errors *errs, const char *pointer, const char *fmt, ...)
{
    field_error *e;
    va_list ap;

    if (errs->n >= PAYMENT_MAX_ERRORS)
        return; /* the first 32 problems are plenty to fix a request */
    e = &errs->e[errs->n++];
    snprintf(e->pointer, sizeof e->pointer, "%s", pointer);
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof e->detail, fmt, ap);
    va_end(ap);
}

/* RFC 6901: "~" -> "~0", "/" -> "~1"; truncated member names stay unambiguous enough */
static void pointer_join(char *out, size_t len, const char *base, const char *key)
{
    size_t o = (size_t)snprintf(out, len, "%s/", base);

    for (const char *k = key; *k && o + 3 < len; k++) {
        if (*k == '~' || *k == '/') {
            out[o++] = '~';
            out[o++] = *k == '~' ? '0' : '1';
        } else {
            out[o++] = *k;
        }
    }
    out[o < len ? o : len - 1] = '\0';
}

bool payment_id_valid(const char *s, size_t len)
{
    if (len < 1 || len > PAYMENT_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) && c < 128) && c != '.' && c != '_' && c != ':' && c != '-')
            return false;
    }
    return true;
}

static bool all_digits(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) /* count lead bytes only */
            n++;
    return n;
}

static int digits2(const char *s)
{
    return (s[0] - '0') * 10 + (s[1] - '0');
}

bool payment_rfc3339_valid(const char *s)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    size_t len = strlen(s), i = 19;
    int year, month, day;

    /* YYYY-MM-DDTHH:MM:SS */
    if (len < 20 || !all_digits(s, 4) || s[4] != '-' || !all_digits(s + 5, 2) || s[7] != '-' ||
        !all_digits(s + 8, 2) || (s[10] != 'T' && s[10] != 't') || !all_digits(s + 11, 2) ||
        s[13] != ':' || !all_digits(s + 14, 2) || s[16] != ':' || !all_digits(s + 17, 2))
        return false;
    year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + digits2(s + 2);
    month = digits2(s + 5);
    day = digits2(s + 8);
    /* year 0000 and offsets past 15:59 are valid RFC 3339 that PostgreSQL cannot store:
     * refuse them here (422), not at the INSERT (a 503 the client would retry forever) */
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > mdays[month - 1])
        return false;
    if (month == 2 && day == 29 && !((year % 4 == 0 && year % 100 != 0) || year % 400 == 0))
        return false;
    if (digits2(s + 11) > 23 || digits2(s + 14) > 59 || digits2(s + 17) > 60)
        return false;
    if (s[i] == '.') { /* fraction: at least one digit */
        size_t start = ++i;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == start || i - start > 9)
            return false;
    }
    if (i < len && (s[i] == 'Z' || s[i] == 'z'))
        return i + 1 == len;
    if (i + 6 == len && (s[i] == '+' || s[i] == '-') && all_digits(s + i + 1, 2) &&
        s[i + 3] == ':' && all_digits(s + i + 4, 2))
        return digits2(s + i + 1) <= 15 && digits2(s + i + 4) <= 59;
    return false;
}

/* A string member: its value, or NULL after reporting why it is not usable. */
static const char *get_string(const json_t *obj, const char *key, const char *ptr, bool required,
                              size_t *len, field_errors *errs)
{
    const json_t *v = json_object_get(obj, key); /* borrowed */

    if (v == NULL) {
        if (required)
            add_error(errs, ptr, "is required");
        return NULL;
    }
    if (!json_is_string(v)) {
        add_error(errs, ptr, "must be a string");
        return NULL;
    }
    *len = json_string_length(v);
    return json_string_value(v);
}

static void check_unknown(const json_t *obj, const char *base, const char *const *known,
                          field_errors *errs)
{
    const char *key;
    json_t *v;
    char ptr[160];

    json_object_foreach((json_t *)obj, key, v)
    {
        bool ok = false;
        (void)v;
        for (const char *const *k = known; *k; k++)
            ok = ok || strcmp(key, *k) == 0;
        if (!ok) {
            pointer_join(ptr, sizeof ptr, base, key);
            add_error(errs, ptr, "is not a known field");
        }
    }
}

/* A required top-level string member @key: its pointer "/key" in @ptr, NULL when absent. */
static const char *top_string(const json_t *root, const char *key, char ptr[32], size_t *len,
                              field_errors *errs)
{
    snprintf(ptr, 32, "/%s", key);
    return get_string(root, key, ptr, true, len, errs);
}

static void check_id(const json_t *root, const char *key, char *out, field_errors *errs)
{
    char ptr[32];
    size_t len = 0;
    const char *s = top_string(root, key, ptr, &len, errs);

    if (s == NULL)
        return;
    if (!payment_id_valid(s, len))
        add_error(errs, ptr, "must be 1..64 characters of A-Z a-z 0-9 . _ : -");
    else
        memcpy(out, s, len + 1);
}

static void check_enum(const json_t *root, const char *key, const char *const *allowed, char *out,
                       size_t out_len, field_errors *errs)
{
    char ptr[32], list[64] = "";
    size_t len = 0;
    const char *s = top_string(root, key, ptr, &len, errs);

    if (s == NULL)
        return;
    for (const char *const *a = allowed; *a; a++) {
        if (strcmp(s, *a) == 0 && strlen(*a) < out_len) {
            memcpy(out, s, len + 1);
            return;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", a == allowed ? "" : ", ",
                 *a);
    }
    add_error(errs, ptr, "must be one of: %s", list);
}

static void check_amount(const json_t *root, payment *out, field_errors *errs)
{
    const json_t *v = json_object_get(root, "amount_cents");
    json_int_t n;

    if (v == NULL) {
        add_error(errs, "/amount_cents", "is required");
        return;
    }
    /* jansson keeps 150.0 and 1e2 as reals: only an integer literal is an integer */
    if (json_is_real(v) &&
        (json_real_value(v) > (double)PAYMENT_AMOUNT_MAX || json_real_value(v) < 0)) {
        add_error(errs, "/amount_cents", "must be between 0 and 10000000000000");
        return;
    }
    if (!json_is_integer(v)) {
        add_error(errs, "/amount_cents",
                  "must be an integer number of cents (no fraction, no exponent)");
        return;
    }
    n = json_integer_value(v);
    if (n < 0 || n > PAYMENT_AMOUNT_MAX) {
        add_error(errs, "/amount_cents", "must be between 0 and 10000000000000");
        return;
    }
    out->amount_cents = (int64_t)n;
}

/*
 * nested_object - whether @obj (member @ptr of the body) is an object to check further: a
 * missing one is an error when @required, anything but an object is @not_object, and its
 * members outside @known are errors.
 */
static bool nested_object(const json_t *obj, const char *ptr, bool required, const char *not_object,
                          const char *const *known, field_errors *errs)
{
    if (obj == NULL) {
        if (required)
            add_error(errs, ptr, "is required");
        return false;
    }
    if (!json_is_object(obj)) {
        add_error(errs, ptr, "%s", not_object);
        return false;
    }
    check_unknown(obj, ptr, known, errs);
    return true;
}

static void check_payee(const json_t *root, payment *out, field_errors *errs)
{
    static const char *const known[] = {"bank", "account", NULL};
    const json_t *payee = json_object_get(root, "payee");
    const char *s;
    size_t len = 0;

    if (!nested_object(payee, "/payee", true, "must be an object with bank and account", known,
                       errs))
        return;
    s = get_string(payee, "bank", "/payee/bank", true, &len, errs);
    if (s != NULL) {
        if (len != 3 || !all_digits(s, 3))
            add_error(errs, "/payee/bank", "must be 3 digits");
        else
            memcpy(out->payee_bank, s, 4);
    }
    s = get_string(payee, "account", "/payee/account", true, &len, errs);
    if (s != NULL) {
        bool ok = len >= 1 && len <= 20;
        for (size_t i = 0; ok && i < len; i++) {
            unsigned char c = (unsigned char)s[i];
            ok = (c < 128 && isalnum(c)) || c == '-';
        }
        if (!ok)
            add_error(errs, "/payee/account", "must be 1..20 characters of 0-9 A-Z a-z -");
        else
            memcpy(out->payee_account, s, len + 1);
    }
}

static void check_payer(const json_t *root, field_errors *errs)
{
    static const char *const known[] = {"name", "document", NULL};
    const json_t *payer = json_object_get(root, "payer");
    const char *s;
    size_t len = 0;

    if (!nested_object(payer, "/payer", false, "must be an object", known, errs))
        return;
    s = get_string(payer, "name", "/payer/name", false, &len, errs);
    if (s != NULL && utf8_chars(s, len) > PAYMENT_NAME_MAX)
        add_error(errs, "/payer/name", "must be at most 140 characters");
    s = get_string(payer, "document", "/payer/document", false, &len, errs);
    if (s != NULL && !((len == 11 || len == 14) && all_digits(s, len)))
        add_error(errs, "/payer/document", "must be 11 or 14 digits");
}

gw_err payment_validate(const json_t *root, payment *out, field_errors *errs)
{
    static const char *const known[] = {"event_id",     "payment_id", "method", "decision",
                                        "amount_cents", "currency",   "payee",  "payer",
                                        "decided_at",   NULL};
    static const char *const methods[] = {"pix", "ted", "card", NULL};
    static const char *const decisions[] = {"approved", "refused", NULL};
    static const char *const currencies[] = {"BRL", NULL};
    const char *s;
    size_t len = 0;

    memset(out, 0, sizeof *out);
    errs->n = 0;
    if (!json_is_object(root)) {
        add_error(errs, "", "the body must be a JSON object");
        return GW_ERR_INVALID;
    }
    check_unknown(root, "", known, errs);
    check_id(root, "event_id", out->event_id, errs);
    check_id(root, "payment_id", out->payment_id, errs);
    check_enum(root, "method", methods, out->method, sizeof out->method, errs);
    check_enum(root, "decision", decisions, out->decision, sizeof out->decision, errs);
    check_amount(root, out, errs);
    check_enum(root, "currency", currencies, out->currency, sizeof out->currency, errs);
    check_payee(root, out, errs);
    check_payer(root, errs);
    s = get_string(root, "decided_at", "/decided_at", false, &len, errs);
    if (s != NULL) {
        if (len >= sizeof out->decided_at || !payment_rfc3339_valid(s))
            add_error(errs, "/decided_at",
                      "must be an RFC 3339 date-time, e.g. 2026-11-29T12:00:00Z");
        else
            memcpy(out->decided_at, s, len + 1);
    }
    return errs->n == 0 ? GW_OK : GW_ERR_INVALID;
}

void payment_routing_key(const payment *p, char *buf, size_t len)
{
    snprintf(buf, len, "payment.%s.%s", p->method, p->decision);
}
