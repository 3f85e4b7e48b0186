/* shared/lib/json_strict.h - parse untrusted JSON with the limits the contract sets */
#ifndef SHARED_LIB_JSON_STRICT_H
#define SHARED_LIB_JSON_STRICT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "shared/lib/err.h"

#define JSON_STRICT_MAX_DEPTH 16

/*
 * json_strict_parse - decode @len bytes of @buf (not NUL-terminated).
 * Rejects invalid UTF-8, repeated member names, U+0000 (escaped or raw),
 * nesting deeper than @max_depth and trailing garbage. An integer too big for
 * 64 bits is decoded as a real (so a validator sees a non-integer there and
 * names the field). On GW_OK *@out is a
 * new reference owned by the caller; on GW_ERR_INVALID @why says what is wrong.
 */
GW_MUSTCHECK gw_err json_strict_parse(const char *buf, size_t len, int max_depth, json_t **out,
                                      char *why, size_t why_len);

/*
 * json_plain - whether @s can stand inside a JSON string as it is: no quote,
 * backslash or control byte. Hot paths print such text with snprintf instead
 * of building a jansson object for it.
 */
bool json_plain(const char *s);

#endif
