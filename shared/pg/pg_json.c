/* shared/pg/pg_json.c - text results into JSON values */
#include "shared/pg/pg_json.h"

#include <stdlib.h>

json_t *pg_json_text(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

json_int_t pg_json_int(const PGresult *res, int row, int col)
{
    return (json_int_t)strtoll(PQgetvalue(res, row, col), NULL, 10);
}
