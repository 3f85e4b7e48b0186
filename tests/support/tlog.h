/* tests/support/tlog.h - the programs' log lines read back strictly, text or JSON */
#ifndef TESTS_SUPPORT_TLOG_H
#define TESTS_SUPPORT_TLOG_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/*
 * tlog_parse_line - one line (without its '\n') as a new JSON object of its
 * fields, key to string, in order. Text lines must be key=value fields
 * separated by one space, starting with ts, level, program and event; a bare
 * value is printable ASCII without '"' or '\\'; a quoted value holds
 * printable ASCII and the escapes \" \\ \n \r \t \xHH, which are undone (the
 * string may then hold any bytes: read it with json_string_length()). JSON
 * lines must parse with jansson into an object with the same four string
 * members. NULL when the line is neither; *@why (@len bytes) says where.
 */
json_t *tlog_parse_line(const char *line, size_t n, bool json, char *why, size_t len);

/*
 * tlog_check_lines - every line of @log parses (tlog_parse_line()) and
 * none has a member named @forbidden (may be NULL). Each bad line is a
 * FAIL, printed escaped. Returns how many lines parsed, -1 when one did not.
 */
int tlog_check_lines(const char *log, bool json, const char *forbidden);

/* tlog_read - the whole file at @path as a new string (free()), NULL when unreadable. */
char *tlog_read(const char *path);

/* tlog_find_event - the first line of @log whose event is @event, parsed (new), or NULL. */
json_t *tlog_find_event(const char *log, bool json, const char *event);

/* tlog_value_is - member @key of @line is exactly the @n bytes @want. */
bool tlog_value_is(const json_t *line, const char *key, const char *want, size_t n);

/*
 * tlog_check_escaped - the checks of a log-escape test on the log at @path:
 * it reads, its lines all parse with no member "forged_line" (at least one
 * line), and its first @event line has @key exactly the @n bytes @want and
 * level @level. That line (new, json_decref()) for more checks, or NULL.
 */
json_t *tlog_check_escaped(const char *path, bool json, const char *event, const char *key,
                           const char *want, size_t n, const char *level);

#endif
