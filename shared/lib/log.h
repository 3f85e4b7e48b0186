/* shared/lib/log.h - structured logs: one event per line on stderr */
#ifndef SHARED_LIB_LOG_H
#define SHARED_LIB_LOG_H

#include <stdbool.h>

typedef enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;
typedef enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON } log_format;

/*
 * log_init - set the program name, threshold and format. Call once from main()
 * before any thread starts; the logger is the only other global besides config.
 */
void log_init(const char *program, log_level level, log_format format);

/* log_parse_level / log_parse_format - false when @s is not a known name. */
bool log_parse_level(const char *s, log_level *out);
bool log_parse_format(const char *s, log_format *out);

bool log_enabled(log_level level);

/*
 * log_event - write one line: ts, level, program, event, then @fmt's
 * "key=value key2=\"value 2\"" fields. In JSON format every field becomes a
 * string member. Never pass secrets or bodies.
 *
 * Only the literal text of @fmt makes the structure (spaces between fields,
 * '=' after a key, '"' around a value that is always quoted). What a
 * conversion produces is data, whatever its bytes: it cannot end the line or
 * start a field. So a value from outside (a request path, a message_id, a
 * reply or error text) goes in through a plain %s (or %.*s), never
 * pre-formatted into a key=value string. Text lines quote a value that is
 * empty or holds anything but printable ASCII, escaping \" \\ \n \r \t and
 * every other byte as \xHH; JSON lines replace invalid UTF-8 with U+FFFD.
 * A value is cut at 1024 bytes (the line then ends with log_truncated=true).
 */
void log_event(log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * log_hold / log_release - the calling thread's info and debug lines between
 * the two are written in one call at the release, instead of one write(2)
 * each: for a loop that logs every item of a batch it has just committed.
 * A warning or an error is written at once, after what was held. Nests.
 */
void log_hold(void);
void log_release(void);

/* Arguments are not evaluated when the level is off. */
#define log_debug(ev, ...)                                                                         \
    do {                                                                                           \
        if (log_enabled(LOG_DEBUG))                                                                \
            log_event(LOG_DEBUG, ev, __VA_ARGS__);                                                 \
    } while (0)
#define log_info(ev, ...)                                                                          \
    do {                                                                                           \
        if (log_enabled(LOG_INFO))                                                                 \
            log_event(LOG_INFO, ev, __VA_ARGS__);                                                  \
    } while (0)
#define log_warn(ev, ...)  log_event(LOG_WARN, ev, __VA_ARGS__)
#define log_error(ev, ...) log_event(LOG_ERROR, ev, __VA_ARGS__)

#endif
