/* shared/pg/db.h - one PostgreSQL connection with its prepared statements */
#ifndef SHARED_PG_DB_H
#define SHARED_PG_DB_H

#include <stdbool.h>
#include <stddef.h>

#include <libpq-fe.h>

#include "shared/lib/err.h"

/* The schema version this build expects: the highest sql/NNNN_*.sql. */
#define DB_SCHEMA_VERSION 24

/* A statement prepared on every (re)connect. */
typedef struct db_stmt {
    const char *name;
    const char *sql;
} db_stmt;

typedef struct db_conn db_conn;

/*
 * Every session's bounds. The longest a program keeps a transaction idle on
 * purpose is the relay's batch waiting for its confirms (RELAY_BATCH_MAX_MS,
 * 45 s, in worker/relay/confirm_clock.h); docs/decisions.md 14 lists the others.
 */
#define DB_STATEMENT_TIMEOUT   "5s"
#define DB_IDLE_IN_TRANSACTION "60s"

/*
 * The longest wait between two tries to reach PostgreSQL: after a failover the
 * new primary takes writes within seconds, and a program still sleeping off a
 * long back-off would add its sleep to the outage (contract section 11).
 */
#define DB_RECONNECT_MAX_MS 2000

/*
 * How long db_exec() and db_prepared() wait for an answer before they ask the
 * server to cancel: a COMMIT (db_commit(), db_batch_commit()) DB_COMMIT_WAIT_MS
 * (only its wait for the standby can be cancelled), anything else DB_WAIT_MS
 * (longer than DB_STATEMENT_TIMEOUT, which ends it first); and how long after
 * that before the connection is given up. With no standby, an accept queued
 * behind a batch whose COMMIT waits is answered 503 within two such waits
 * (contract section 11: within 10 s).
 */
#define DB_COMMIT_WAIT_MS 3000
#define DB_WAIT_MS        6000
#define DB_CANCEL_WAIT_MS 2000

/*
 * db_open - connect to @url as @app (application_name), set the session's
 * bounds (above), and prepare @stmts (borrowed: must outlive the
 * connection). On GW_OK *@out is owned by the caller (db_close()). A failed
 * first connect still returns GW_OK with a broken connection when @lazy is
 * true, so a daemon can start and let db_ensure() retry; otherwise GW_ERR_DB.
 * One db_conn is never used by two threads at once.
 */
GW_MUSTCHECK gw_err db_open(const char *url, const char *app, const db_stmt *stmts, size_t n,
                            bool lazy, db_conn **out);
void db_close(db_conn *db); /* accepts NULL */

/* db_pg - the libpq handle, borrowed. */
PGconn *db_pg(db_conn *db);

/*
 * db_ensure - make the connection usable: when it is broken, reconnect once
 * and re-prepare. GW_ERR_DB when PostgreSQL is still unavailable.
 */
GW_MUSTCHECK gw_err db_ensure(db_conn *db);

/* db_healthy - a cheap "SELECT 1" round trip. */
bool db_healthy(db_conn *db);

/*
 * db_check - compare @res's status to @want; map the SQLSTATE of a failure:
 * 23505 -> GW_ERR_CONFLICT, 40001/40P01 -> GW_ERR_RETRY, anything else GW_ERR_DB.
 * GW_ERR_CONFLICT is not transient: a unique violation is raised only when a
 * committed row (or one the same transaction wrote) holds the key, so the same
 * statement alone fails again on every retry; the caller answers it for good
 * (decision 13). Logs failures once with @stmt (a unique violation with its
 * constraint). @res stays owned by the caller.
 */
GW_MUSTCHECK gw_err db_check(const PGresult *res, ExecStatusType want, const char *stmt);

/* db_message_line - the first line of @msg into @out (a log value: shared/log escapes it). */
void db_message_line(const char *msg, char *out, size_t len);

/*
 * db_exec - run a parameterless command (BEGIN, ROLLBACK, SET ...; a COMMIT goes
 * through db_commit(), which waits longer). A COMMIT that PostgreSQL answered with "the wait for
 * synchronous replication was cancelled" is GW_ERR_DB: committed here, perhaps on no standby, so
 * its outcome is unknown and nothing may be promised on it (db_prepared() alike for a statement
 * that commits by itself).
 */
GW_MUSTCHECK gw_err db_exec(db_conn *db, const char *sql);

/*
 * db_commit - COMMIT, with the COMMIT's own bound (DB_COMMIT_WAIT_MS: it may wait for the
 * synchronous standby); a COMMIT whose wait was cancelled fails with an unknown outcome.
 */
GW_MUSTCHECK gw_err db_commit(db_conn *db);

/*
 * db_begin - BEGIN (or @sql, e.g. "BEGIN ISOLATION LEVEL ..."). A connection
 * that died while idle (the server restarted) is only noticed here: reconnect
 * once and try again, which is safe because nothing was sent yet.
 */
GW_MUSTCHECK gw_err db_begin(db_conn *db, const char *sql);

/*
 * DB_SYNC_WRITE - a query that writes a few bytes of WAL in its transaction
 * and nothing else. A COMMIT waits for the synchronous standby only when its
 * transaction wrote WAL (an xid alone is not enough: PostgreSQL then commits
 * asynchronously), and the standby acknowledges WAL in order: once that COMMIT
 * returns, everything the transaction read is on the standby too.
 */
#define DB_SYNC_WRITE "SELECT pg_logical_emit_message(true, 'paygw', 'sync')"

/*
 * db_sync_barrier - commit an empty write, so that everything this session has
 * read is on the synchronous standby once it returns GW_OK. For an answer given
 * on rows the session did not write itself (a duplicate acked because its inbox
 * row exists): that row may be one whose commit was cancelled before its standby
 * had it, visible here and lost by a failover.
 */
GW_MUSTCHECK gw_err db_sync_barrier(db_conn *db);

/* db_rollback - end a failed transaction; keeps the caller's first error, logs its own. */
void db_rollback(db_conn *db);

/* db_prepared - run prepared statement @name; the result is owned by the caller (PQclear). */
PGresult *db_prepared(db_conn *db, const char *name, int n, const char *const *params);

/*
 * db_begin_prepared - BEGIN and prepared statement @name in one round trip;
 * its result as db_prepared() returns it (NULL when the connection is gone).
 * The transaction is open whatever the statement's outcome, unless the BEGIN
 * itself failed: db_commit() or db_rollback() ends it. Reconnects once, as
 * db_begin() does.
 */
PGresult *db_begin_prepared(db_conn *db, const char *name, int n, const char *const *params);

/*
 * db_prepared_commit - prepared command @name, then COMMIT, in one round trip:
 * the COMMIT runs only if the command succeeded. GW_OK when both did; on an
 * error the transaction is left for db_rollback(); a COMMIT that failed or
 * whose wait for the standby was cancelled is GW_ERR_DB (an unknown outcome,
 * as with db_commit()).
 */
GW_MUSTCHECK gw_err db_prepared_commit(db_conn *db, const char *name, int n,
                                       const char *const *params);

/*
 * db_prepared_rows - run prepared command @name with the integer parameters
 * @a and @b (the retention purges: an age and a batch limit); *@rows is how
 * many rows it changed (for "SELECT f($1, $2)", the one integer f returns),
 * 0 on failure.
 */
GW_MUSTCHECK gw_err db_prepared_rows(db_conn *db, const char *name, int a, int b, long *rows);

/*
 * db_batch_commit - BEGIN, prepared function @name on @json (one parameter:
 * the batch as a JSON array of @n items, answered by a row per item) and
 * COMMIT, in one round trip (the accept and settle batches). GW_OK: committed,
 * and *@res (owned by the caller) holds the @n rows. Otherwise *@res is NULL and
 * *@at_commit says which failure it was: false, nothing was committed (the
 * BEGIN or the function failed; rolled back); true, the outcome is unknown (the
 * COMMIT failed or its wait for the standby was cancelled, the connection broke
 * after the BEGIN, or the answer was not @n rows), as with db_commit().
 */
GW_MUSTCHECK gw_err db_batch_commit(db_conn *db, const char *name, const char *json, int n,
                                    PGresult **res, bool *at_commit);

/*
 * db_batch_commit_then - db_batch_commit(), and in the same round trip, once
 * the COMMIT is done, prepared statement @then (no parameters) in a transaction
 * of its own: the relay's wake-up after an accept batch. *@then_ok when it ran
 * and committed; whether it did changes nothing in the batch's result.
 */
GW_MUSTCHECK gw_err db_batch_commit_then(db_conn *db, const char *name, const char *json, int n,
                                         const char *then, PGresult **res, bool *at_commit,
                                         bool *then_ok);

/*
 * db_check_schema - GW_OK when schema_migrations is at DB_SCHEMA_VERSION;
 * otherwise logs both versions and returns GW_ERR_INVALID (GW_ERR_DB when
 * the query itself fails).
 */
GW_MUSTCHECK gw_err db_check_schema(db_conn *db);

/*
 * db_wait_schema - at start-up: wait up to @wait_s for PostgreSQL at @url,
 * then db_check_schema(). GW_OK, GW_ERR_DB (never reachable) or
 * GW_ERR_INVALID (wrong schema). Logs the reason.
 */
GW_MUSTCHECK gw_err db_wait_schema(const char *url, const char *app, int wait_s);

#endif
