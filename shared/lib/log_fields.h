/* shared/lib/log_fields.h - one log event's format and arguments, split into key/value fields */
#ifndef SHARED_LIB_LOG_FIELDS_H
#define SHARED_LIB_LOG_FIELDS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#define LOG_FIELDS_MAX 32
#define LOG_KEY_MAX    48
#define LOG_VALUE_MAX  1024 /* raw bytes of one value; more is cut */
#define LOG_RAW_MAX    4096 /* raw bytes of all values of one event */

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

/*
 * log_fields_split - walk @fmt: its literal text builds keys and separates
 * fields (a space between fields, '=' after a key, '"' around a quoted value);
 * what each conversion of @ap produces is appended, as it is, to the current
 * key or value. The writers in shared/lib/log.c escape each value once.
 */
void log_fields_split(log_rec *r, const char *fmt, va_list *ap);

#endif
