/* tests/admin/tschema.c - the JSON Schema subset of tschema.h, strict about what it does not know
 */
#include "tests/admin/tschema.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/admin/tadmin.h"

#define MAX_DEPTH 64

typedef struct ctx {
    const json_t *root;
    int quiet;  /* > 0 inside anyOf/oneOf/not branches: count, do not report */
    int errors; /* violations seen (reported or not) */
    int depth;
    char *why;
    size_t len, used;
} ctx;

static void validate(ctx *c, const json_t *schema, const json_t *inst, const char *path);

static void fail(ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(ctx *c, const char *path, const char *fmt, ...)
{
    va_list ap;
    int n;

    c->errors++;
    if (c->quiet > 0 || c->why == NULL || c->used + 1 >= c->len)
        return;
    n = snprintf(c->why + c->used, c->len - c->used, "%s%s: ", c->used ? "; " : "",
                 *path ? path : "(root)");
    if (n > 0)
        c->used = c->used + (size_t)n < c->len ? c->used + (size_t)n : c->len - 1;
    va_start(ap, fmt);
    n = vsnprintf(c->why + c->used, c->len - c->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        c->used = c->used + (size_t)n < c->len ? c->used + (size_t)n : c->len - 1;
}

const json_t *tschema_resolve(const json_t *root, const char *ref)
{
    const json_t *v = root;
    const char *p;

    if (ref == NULL || ref[0] != '#')
        return NULL;
    p = ref + 1;
    while (*p == '/' && v != NULL) {
        char token[256];
        size_t n = 0;

        p++;
        while (*p != '\0' && *p != '/' && n + 1 < sizeof token) {
            if (p[0] == '~' && p[1] == '1') {
                token[n++] = '/';
                p += 2;
            } else if (p[0] == '~' && p[1] == '0') {
                token[n++] = '~';
                p += 2;
            } else {
                token[n++] = *p++;
            }
        }
        token[n] = '\0';
        if (json_is_object(v)) {
            v = json_object_get(v, token);
        } else if (json_is_array(v)) {
            char *end;
            long i = strtol(token, &end, 10);
            v = (*end == '\0' && i >= 0) ? json_array_get(v, (size_t)i) : NULL;
        } else {
            v = NULL;
        }
    }
    return *p == '\0' ? v : NULL;
}

const json_t *tschema_deref(const json_t *root, const json_t *v)
{
    for (int i = 0; i < 16 && json_is_object(v) && json_is_string(json_object_get(v, "$ref")); i++)
        v = tschema_resolve(root, json_string_value(json_object_get(v, "$ref")));
    return v;
}

#define TYPE_BIT(t) (1u << (t))

static bool is_type(const json_t *v, const char *type, bool *known)
{
    /* the JSON Schema types that are sets of jansson's */
    static const struct {
        const char *name;
        unsigned types;
    } kinds[] = {
        {"null", TYPE_BIT(JSON_NULL)},     {"boolean", TYPE_BIT(JSON_TRUE) | TYPE_BIT(JSON_FALSE)},
        {"object", TYPE_BIT(JSON_OBJECT)}, {"array", TYPE_BIT(JSON_ARRAY)},
        {"string", TYPE_BIT(JSON_STRING)}, {"number", TYPE_BIT(JSON_INTEGER) | TYPE_BIT(JSON_REAL)},
    };

    *known = true;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(type, kinds[i].name) == 0)
            return v != NULL && (kinds[i].types & TYPE_BIT(json_typeof(v))) != 0;
    if (strcmp(type, "integer") == 0) /* a real with no fraction is an integer too */
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    *known = false;
    return false;
}

static void check_type(ctx *c, const json_t *type, const json_t *inst, const char *path)
{
    bool known, any = false;
    size_t i;
    json_t *t;

    if (json_is_string(type)) {
        any = is_type(inst, json_string_value(type), &known);
        if (!known)
            fail(c, path, "unknown type %s in the schema", json_string_value(type));
        else if (!any)
            fail(c, path, "%s is not of type %s", tadm_dump(inst), json_string_value(type));
        return;
    }
    if (!json_is_array(type) || json_array_size(type) == 0) {
        fail(c, path, "bad \"type\" in the schema");
        return;
    }
    json_array_foreach(type, i, t)
    {
        if (!json_is_string(t)) {
            fail(c, path, "bad \"type\" in the schema");
            return;
        }
        any |= is_type(inst, json_string_value(t), &known);
        if (!known)
            fail(c, path, "unknown type %s in the schema", json_string_value(t));
    }
    if (!any)
        fail(c, path, "%s is not of type %s", tadm_dump(inst), tadm_dump(type));
}

static size_t utf8_length(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool is_base64(const char *s)
{
    size_t n = strlen(s), pad = 0;

    if (n % 4 != 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool alnum =
            (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

        if (ch == '=') {
            pad++;
        } else if (pad > 0 || !(alnum || ch == '+' || ch == '/')) {
            return false; /* a character after padding, or one outside the alphabet */
        }
    }
    return pad <= 2;
}

/* RFC 3986: a scheme, a colon, and no white space or controls. */
static bool is_uri(const char *s, bool reference)
{
    const char *p = s;

    for (const char *q = s; *q; q++)
        if ((unsigned char)*q <= ' ' || *q == '"' || *q == '<' || *q == '>' || *q == '\\')
            return false;
    if (reference)
        return true;
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
        return false;
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '.' || *p == '-')
        p++;
    return *p == ':';
}

static void check_format(ctx *c, const char *format, const json_t *inst, const char *path)
{
    const char *s = json_string_value(inst);

    if (strcmp(format, "date-time") == 0) {
        if (s != NULL && !tadm_is_date_time(s))
            fail(c, path, "\"%s\" is not an RFC 3339 date-time", s);
    } else if (strcmp(format, "uri") == 0 || strcmp(format, "uri-reference") == 0) {
        if (s != NULL && !is_uri(s, format[3] == '-'))
            fail(c, path, "\"%s\" is not a %s", s, format);
    } else {
        fail(c, path, "format %s is not supported by this checker", format);
    }
}

static void check_pattern(ctx *c, const char *pattern, const json_t *inst, const char *path)
{
    regex_t re;
    int rc;

    if (!json_is_string(inst))
        return;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
        fail(c, path, "pattern %s is not supported by this checker", pattern);
        return;
    }
    rc = regexec(&re, json_string_value(inst), 0, NULL, 0);
    regfree(&re);
    if (rc != 0)
        fail(c, path, "\"%s\" does not match %s", json_string_value(inst), pattern);
}

static void check_number(ctx *c, const char *key, const json_t *limit, const json_t *inst,
                         const char *path)
{
    double v, l;
    bool ok;

    if (!json_is_number(limit)) {
        fail(c, path, "bad \"%s\" in the schema", key);
        return;
    }
    if (!json_is_number(inst))
        return;
    v = json_number_value(inst);
    l = json_number_value(limit);
    if (strcmp(key, "minimum") == 0)
        ok = v >= l;
    else if (strcmp(key, "maximum") == 0)
        ok = v <= l;
    else if (strcmp(key, "exclusiveMinimum") == 0)
        ok = v > l;
    else
        ok = v < l;
    if (!ok)
        fail(c, path, "%s breaks %s %s", tadm_dump(inst), key, tadm_dump(limit));
}

/* Validate quietly: how many violations @schema finds in @inst. */
static int count_errors(ctx *c, const json_t *schema, const json_t *inst, const char *path)
{
    ctx sub = *c;

    sub.quiet++;
    sub.errors = 0;
    validate(&sub, schema, inst, path);
    return sub.errors;
}

static void check_object(ctx *c, const json_t *schema, const json_t *inst, const char *path)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    const json_t *names = json_object_get(schema, "propertyNames");
    const json_t *req = json_object_get(schema, "required");
    char sub[512];
    const char *key;
    json_t *v;
    size_t i;

    if (!json_is_object(inst))
        return;
    json_array_foreach(req, i, v)
    {
        if (json_is_string(v) && json_object_get(inst, json_string_value(v)) == NULL)
            fail(c, path, "the required member \"%s\" is missing", json_string_value(v));
    }
    json_object_foreach((json_t *)inst, key, v)
    {
        const json_t *p = json_object_get(props, key);

        snprintf(sub, sizeof sub, "%s/%s", path, key);
        if (names != NULL) {
            json_t *k = json_string(key);
            validate(c, names, k, sub);
            json_decref(k);
        }
        if (p != NULL)
            validate(c, p, v, sub);
        else if (json_is_false(extra))
            fail(c, path, "the member \"%s\" is not allowed (additionalProperties: false)", key);
        else if (json_is_object(extra))
            validate(c, extra, v, sub);
    }
}

static void check_array(ctx *c, const json_t *schema, const json_t *inst, const char *path)
{
    const json_t *items = json_object_get(schema, "items");
    const json_t *min = json_object_get(schema, "minItems");
    const json_t *max = json_object_get(schema, "maxItems");
    char sub[512];
    size_t i;
    json_t *v;

    if (!json_is_array(inst))
        return;
    if (json_is_integer(min) && (json_int_t)json_array_size(inst) < json_integer_value(min))
        fail(c, path, "fewer than %lld items", (long long)json_integer_value(min));
    if (json_is_integer(max) && (json_int_t)json_array_size(inst) > json_integer_value(max))
        fail(c, path, "more than %lld items", (long long)json_integer_value(max));
    if (items == NULL)
        return;
    json_array_foreach(inst, i, v)
    {
        snprintf(sub, sizeof sub, "%s/%zu", path, i);
        validate(c, items, v, sub);
    }
}

static void check_string(ctx *c, const json_t *schema, const json_t *inst, const char *path)
{
    const json_t *min = json_object_get(schema, "minLength");
    const json_t *max = json_object_get(schema, "maxLength");
    size_t n;

    if (!json_is_string(inst))
        return;
    n = utf8_length(json_string_value(inst));
    if (json_is_integer(min) && (json_int_t)n < json_integer_value(min))
        fail(c, path, "shorter than %lld characters", (long long)json_integer_value(min));
    if (json_is_integer(max) && (json_int_t)n > json_integer_value(max))
        fail(c, path, "longer than %lld characters", (long long)json_integer_value(max));
}

static bool is_annotation(const char *key)
{
    static const char *const skip[] = {
        "description", "title",     "examples", "example",          "default", "deprecated",
        "readOnly",    "writeOnly", "$comment", "contentMediaType", NULL,
    };

    for (const char *const *s = skip; *s != NULL; s++)
        if (strcmp(key, *s) == 0)
            return true;
    return false;
}

/* The keywords handled by check_object/check_array/check_string (read there, not here). */
static bool is_structural(const char *key)
{
    static const char *const handled[] = {
        "properties",    "additionalProperties",
        "propertyNames", "required",
        "items",         "minItems",
        "maxItems",      "minLength",
        "maxLength",     NULL,
    };

    for (const char *const *s = handled; *s != NULL; s++)
        if (strcmp(key, *s) == 0)
            return true;
    return false;
}

static void validate(ctx *c, const json_t *schema, const json_t *inst, const char *path)
{
    const char *key;
    json_t *v;

    if (json_is_true(schema))
        return;
    if (json_is_false(schema)) {
        fail(c, path, "no value is allowed here");
        return;
    }
    if (!json_is_object(schema)) {
        fail(c, path, "the schema is not an object");
        return;
    }
    if (++c->depth > MAX_DEPTH) {
        fail(c, path, "schema nesting deeper than %d ($ref loop?)", MAX_DEPTH);
        c->depth--;
        return;
    }
    json_object_foreach((json_t *)schema, key, v)
    {
        if (is_annotation(key) || is_structural(key)) {
            continue;
        } else if (strcmp(key, "$ref") == 0) {
            const json_t *target = tschema_resolve(c->root, json_string_value(v));
            if (target == NULL)
                fail(c, path, "unresolvable $ref %s", tadm_dump(v));
            else
                validate(c, target, inst, path);
        } else if (strcmp(key, "type") == 0) {
            check_type(c, v, inst, path);
        } else if (strcmp(key, "enum") == 0) {
            bool found = false;
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e)
            {
                found |= json_equal(e, (json_t *)inst);
            }
            if (!found)
                fail(c, path, "%s is not one of %s", tadm_dump(inst), tadm_dump(v));
        } else if (strcmp(key, "const") == 0) {
            if (!json_equal(v, (json_t *)inst))
                fail(c, path, "%s is not the constant %s", tadm_dump(inst), tadm_dump(v));
        } else if (strcmp(key, "minimum") == 0 || strcmp(key, "maximum") == 0 ||
                   strcmp(key, "exclusiveMinimum") == 0 || strcmp(key, "exclusiveMaximum") == 0) {
            check_number(c, key, v, inst, path);
        } else if (strcmp(key, "pattern") == 0 && json_is_string(v)) {
            check_pattern(c, json_string_value(v), inst, path);
        } else if (strcmp(key, "format") == 0 && json_is_string(v)) {
            check_format(c, json_string_value(v), inst, path);
        } else if (strcmp(key, "contentEncoding") == 0 && json_is_string(v)) {
            if (strcmp(json_string_value(v), "base64") != 0)
                fail(c, path, "contentEncoding %s is not supported", json_string_value(v));
            else if (json_is_string(inst) && !is_base64(json_string_value(inst)))
                fail(c, path, "%s is not base64", tadm_dump(inst));
        } else if (strcmp(key, "allOf") == 0 && json_is_array(v)) {
            size_t i;
            json_t *s;
            json_array_foreach(v, i, s)
            {
                validate(c, s, inst, path);
            }
        } else if ((strcmp(key, "anyOf") == 0 || strcmp(key, "oneOf") == 0) && json_is_array(v)) {
            int passing = 0;
            size_t i;
            json_t *s;
            json_array_foreach(v, i, s)
            {
                passing += count_errors(c, s, inst, path) == 0;
            }
            if (key[0] == 'a' && passing == 0)
                fail(c, path, "matches none of anyOf");
            else if (key[0] == 'o' && passing != 1)
                fail(c, path, "matches %d of oneOf (want exactly 1)", passing);
        } else if (strcmp(key, "not") == 0) {
            if (count_errors(c, v, inst, path) == 0)
                fail(c, path, "matches the schema under \"not\"");
        } else {
            fail(c, path, "keyword \"%s\" is not supported by this checker", key);
        }
    }
    check_object(c, schema, inst, path);
    check_array(c, schema, inst, path);
    check_string(c, schema, inst, path);
    c->depth--;
}

int tschema_validate(const json_t *root, const json_t *schema, const json_t *inst, char *why,
                     size_t len)
{
    ctx c = {.root = root, .why = why, .len = len};

    if (why != NULL && len > 0)
        why[0] = '\0';
    if (schema == NULL) {
        fail(&c, "", "no schema");
        return c.errors;
    }
    validate(&c, schema, inst, "");
    return c.errors;
}
