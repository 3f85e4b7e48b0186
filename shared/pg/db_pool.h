/* shared/pg/db_pool.h - a fixed set of PostgreSQL connections shared by the HTTP threads */
#ifndef SHARED_PG_DB_POOL_H
#define SHARED_PG_DB_POOL_H

#include <stddef.h>

#include "shared/lib/err.h"
#include "shared/pg/db.h"

typedef struct db_pool db_pool;

/*
 * db_pool_new - open @size connections to @url, each preparing @stmts
 * (borrowed, static). Connections that fail now are retried on acquire, so the
 * API starts and answers 503 while PostgreSQL is down. Owned by the caller.
 */
GW_MUSTCHECK gw_err db_pool_new(const char *url, size_t size, const db_stmt *stmts, size_t n,
                                db_pool **out);
void db_pool_free(db_pool *pool); /* accepts NULL; no connection may be out */

/*
 * db_pool_acquire - a connection for this thread alone, made usable with
 * db_ensure(). Waits at most @wait_ms for a free one. GW_ERR_RETRY when none
 * was free, GW_ERR_DB when PostgreSQL is unavailable (the connection is
 * already back in the pool then). Give it back with db_pool_release().
 */
GW_MUSTCHECK gw_err db_pool_acquire(db_pool *pool, int wait_ms, db_conn **out);
void db_pool_release(db_pool *pool, db_conn *db);

#endif
