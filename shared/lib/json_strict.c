/* shared/lib/json_strict.c - jansson with duplicate, NUL and depth checks */
#include "shared/lib/json_strict.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/*
 * A bracket count outside strings, done before decoding: jansson's own depth
 * limit is a compile-time 2048, far above what a payment needs.
 */
static bool depth_ok(const char *buf, size_t len, int max_depth)
{
    bool in_string = false, escaped = false;
    int depth = 0;

    for (size_t i = 0; i < len; i++) {
        char c = buf[i];

        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > max_depth)
                return false;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return true;
}

gw_err json_strict_parse(const char *buf, size_t len, int max_depth, json_t **out, char *why,
                         size_t why_len)
{
    json_error_t jerr;
    json_t *root;

    if (len == 0) {
        snprintf(why, why_len, "the body is empty");
        return GW_ERR_INVALID;
    }
    if (memchr(buf, '\0', len) != NULL) {
        snprintf(why, why_len, "the body contains a NUL byte");
        return GW_ERR_INVALID;
    }
    if (!depth_ok(buf, len, max_depth)) {
        snprintf(why, why_len, "JSON nesting deeper than %d", max_depth);
        return GW_ERR_INVALID;
    }
    /* no JSON_ALLOW_NUL: "\u0000" is refused; invalid UTF-8 is always refused */
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL && strncmp(jerr.text, "too big integer", 15) == 0) {
        /* valid JSON with an integer past 64 bits: keep it as a real, so validation
         * names the field (a 422) instead of calling the body malformed (a 400) */
        root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
    }
    if (root == NULL) {
        snprintf(why, why_len, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                 jerr.text);
        return GW_ERR_INVALID;
    }
    *out = root; /* moves to caller */
    return GW_OK;
}

bool json_plain(const char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            return false;
    return true;
}
