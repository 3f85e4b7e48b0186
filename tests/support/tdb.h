/* tests/support/tdb.h - a fresh PostgreSQL database per test, and one-line queries on it */
#ifndef TESTS_SUPPORT_TDB_H
#define TESTS_SUPPORT_TDB_H

#include <stdbool.h>

typedef struct tdb tdb;

/*
 * tdb_admin_url - $GW_TEST_PG_URL, or NULL when unset or empty: integration
 * tests then return 77 (meson: SKIP).
 */
const char *tdb_admin_url(void);

/*
 * tdb_create - CREATE DATABASE t_<pid>_<random> on the server of
 * tdb_admin_url() and, when @migrate, run "$GW_MIGRATE <url>" on it (default
 * $GW_SOURCE_ROOT/scripts/migrate). Returns a handle owned by the caller
 * (tdb_drop()), NULL after printing why.
 */
tdb *tdb_create(bool migrate);

/* tdb_url - the new database's URL, borrowed. tdb_name - its name. */
const char *tdb_url(const tdb *db);
const char *tdb_name(const tdb *db);

/*
 * Queries on the test database. Parameters are text, NULL-terminated after
 * @sql ($1, $2 ...). Each reconnects when the connection broke (the db-restart
 * test stops the server) and prints the error when the query fails.
 */
/* tdb_value - row 0, column 0 as a new string (free()); NULL when no row, SQL NULL or error. */
char *tdb_value(tdb *db, const char *sql, ...) __attribute__((sentinel));
/* tdb_long - row 0, column 0 as an integer; -1 when no row, SQL NULL or error. */
long long tdb_long(tdb *db, const char *sql, ...) __attribute__((sentinel));
/* tdb_rows - the number of rows the query returns; -1 on error. */
long long tdb_rows(tdb *db, const char *sql, ...) __attribute__((sentinel));
/* tdb_exec - a command; false on error. */
bool tdb_exec(tdb *db, const char *sql, ...) __attribute__((sentinel));

/*
 * CHECK_SQL_STR - the value tdb_value() gives for @sql (no parameters) is
 * @want (NULL: no row or SQL NULL). CHECK_SQL_CONTAINS - it contains @needle.
 * Checks of tcheck.h: a failure names the line and the query.
 */
#define CHECK_SQL_STR(db, sql, want) tdb_check_at(__FILE__, __LINE__, (db), (sql), (want), false)
#define CHECK_SQL_CONTAINS(db, sql, needle)                                                        \
    tdb_check_at(__FILE__, __LINE__, (db), (sql), (needle), true)
bool tdb_check_at(const char *file, int line, tdb *db, const char *sql, const char *want,
                  bool contains);

/*
 * tdb_main - the whole main() of a test on a database of its own: 77 (SKIP,
 * the line printed) without GW_TEST_PG_URL; otherwise tdb_create(@migrate)
 * into *@db (CHECKed), @run when it was made, tdb_drop(), then the summary of
 * @name. A NULL @db makes no database: @run makes its own.
 */
int tdb_main(const char *name, bool migrate, tdb **db, void (*run)(void));

/* tdb_drop - drop the database (best effort, WITH (FORCE) on PostgreSQL 13+) and free. NULL ok. */
void tdb_drop(tdb *db);

#endif
