/* shared/lib/json_out.h - JSON text written straight into a growing buffer */
#ifndef SHARED_LIB_JSON_OUT_H
#define SHARED_LIB_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * For the hot paths that hand a batch to PostgreSQL as one JSON array: no tree
 * of jansson objects built and then printed, one buffer written once. The
 * caller writes the structure; a comma goes in front of a member or an element
 * by itself. Out of memory, the text is lost and json_out_take() says so.
 */
typedef struct json_out {
    char *buf;
    size_t len, cap;
    bool failed;
} json_out;

/* json_out_open - '{' or '[' (@bracket), as a member's value or an element. */
void json_out_open(json_out *o, char bracket);

/* json_out_close - '}' or ']'. */
void json_out_close(json_out *o, char bracket);

/* json_out_key - a member's name and its colon; its value comes next. */
void json_out_key(json_out *o, const char *key);

/* json_out_str - @s (UTF-8, NUL-terminated) as a JSON string: quote, backslash and
 * control bytes escaped, everything else as it is. */
void json_out_str(json_out *o, const char *s);

/* json_out_member - a member whose value is the string @value: json_out_key(), json_out_str(). */
void json_out_member(json_out *o, const char *key, const char *value);

/* json_out_int - @v as a JSON number. */
void json_out_int(json_out *o, int64_t v);

/* json_out_take - the text (NUL-terminated, the caller's to free()); NULL when a
 * write failed for memory. @o is empty again after it. */
char *json_out_take(json_out *o);

#endif
