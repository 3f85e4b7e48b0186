/* shared/pg/db_pool.c - a mutex, a condition and a stack of idle connections */
#include "shared/pg/db_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "shared/lib/deadline.h"

struct db_pool {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    size_t size, nidle;
    db_conn **all;
    db_conn **idle; /* stack of idle connections */
};

gw_err db_pool_new(const char *url, size_t size, const db_stmt *stmts, size_t n, db_pool **out)
{
    db_pool *pool = calloc(1, sizeof *pool);

    if (pool == NULL)
        return GW_ERR_NOMEM;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->freed, NULL);
    pool->all = calloc(size, sizeof *pool->all);
    pool->idle = calloc(size, sizeof *pool->idle);
    if (pool->all == NULL || pool->idle == NULL) {
        db_pool_free(pool);
        return GW_ERR_NOMEM;
    }
    for (size_t i = 0; i < size; i++) {
        if (db_open(url, "payments-api", stmts, n, true, &pool->all[i]) != GW_OK) {
            db_pool_free(pool);
            return GW_ERR_NOMEM;
        }
        pool->idle[pool->nidle++] = pool->all[i];
        pool->size++;
    }
    *out = pool;
    return GW_OK;
}

void db_pool_free(db_pool *pool)
{
    if (pool == NULL)
        return;
    for (size_t i = 0; i < pool->size; i++)
        db_close(pool->all[i]);
    free(pool->all);
    free(pool->idle);
    pthread_cond_destroy(&pool->freed);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

gw_err db_pool_acquire(db_pool *pool, int wait_ms, db_conn **out)
{
    struct timespec deadline = deadline_in((long)wait_ms * 1000000L);
    db_conn *db = NULL;

    pthread_mutex_lock(&pool->lock);
    while (pool->nidle == 0) {
        if (pthread_cond_timedwait(&pool->freed, &pool->lock, &deadline) == ETIMEDOUT)
            break;
    }
    if (pool->nidle > 0)
        db = pool->idle[--pool->nidle];
    pthread_mutex_unlock(&pool->lock);
    if (db == NULL)
        return GW_ERR_RETRY;
    /* reconnect outside the lock: a slow connect must not stall the other threads */
    if (db_ensure(db) != GW_OK) {
        db_pool_release(pool, db);
        return GW_ERR_DB;
    }
    *out = db;
    return GW_OK;
}

void db_pool_release(db_pool *pool, db_conn *db)
{
    pthread_mutex_lock(&pool->lock);
    pool->idle[pool->nidle++] = db;
    pthread_cond_signal(&pool->freed);
    pthread_mutex_unlock(&pool->lock);
}
