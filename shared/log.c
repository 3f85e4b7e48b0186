/* shared/log.c - key=value or JSON lines on stderr */
#include "shared/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <jansson.h>

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

/* Split "k=v k2=\"v 2\"" into members of @obj; unparsable text goes under "msg". */
static void fields_to_json(json_t *obj, const char *s)
{
    char key[64], val[1024];

    while (*s) {
        size_t k = 0, v = 0;

        while (*s == ' ')
            s++;
        if (*s == '\0')
            break;
        while (*s && *s != '=' && *s != ' ' && k < sizeof key - 1)
            key[k++] = *s++;
        key[k] = '\0';
        if (*s != '=') { /* a bare word: keep it rather than drop it */
            json_object_set_new(obj, "msg", json_string(key));
            continue;
        }
        s++;
        if (*s == '"') {
            s++;
            while (*s && *s != '"' && v < sizeof val - 1)
                val[v++] = *s++;
            if (*s == '"')
                s++;
        } else {
            while (*s && *s != ' ' && v < sizeof val - 1)
                val[v++] = *s++;
        }
        val[v] = '\0';
        json_object_set_new(obj, key, json_stringn_nocheck(val, v));
    }
}

void log_event(log_level level, const char *event, const char *fmt, ...)
{
    char ts[64], fields[2048];
    va_list ap;

    if (!log_enabled(level))
        return;
    format_ts(ts, sizeof ts);
    va_start(ap, fmt);
    vsnprintf(fields, sizeof fields, fmt, ap);
    va_end(ap);

    if (log_fmt == LOG_FORMAT_JSON) {
        json_t *obj = json_object();
        char *line;

        json_object_set_new(obj, "ts", json_string(ts));
        json_object_set_new(obj, "level", json_string(level_names[level]));
        json_object_set_new(obj, "program", json_string(log_program));
        json_object_set_new(obj, "event", json_string(event));
        fields_to_json(obj, fields);
        line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
        json_decref(obj);
        if (line == NULL)
            return;
        fprintf(stderr, "%s\n", line); /* one fprintf: stdio locks the stream for the line */
        free(line);
        return;
    }
    fprintf(stderr, "ts=%s level=%s program=%s event=%s%s%s\n", ts, level_names[level], log_program,
            event, fields[0] ? " " : "", fields);
}
