/* shared/pg/pg_json.h - result columns as the API's JSON shows them */
#ifndef SHARED_PG_PG_JSON_H
#define SHARED_PG_PG_JSON_H

#include <jansson.h>
#include <libpq-fe.h>

/* The SQL of timestamptz column @col as the API shows a time: RFC 3339 in UTC, milliseconds. */
#define PG_JSON_TIME(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* pg_json_text - the text of @row, @col as a JSON string; JSON null for SQL NULL. New reference. */
json_t *pg_json_text(const PGresult *res, int row, int col);

/* pg_json_int - the integer of @row, @col (0 for SQL NULL). */
json_int_t pg_json_int(const PGresult *res, int row, int col);

#endif
