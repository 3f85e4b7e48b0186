/* api/payments.h - POST /v1/payments and GET /v1/payments/{payment_id} */
#ifndef API_PAYMENTS_H
#define API_PAYMENTS_H

#include <stddef.h>

#include "api/api_metrics.h"
#include "api/committer.h"
#include "api/outbox_watch.h"
#include "shared/http/http.h"
#include "shared/pg/db.h"
#include "shared/pg/db_pool.h"

/* What the handlers use; all borrowed from main(). */
typedef struct payments_deps {
    db_pool *pool;        /* reads */
    committer *committer; /* accepts, group-committed */
    outbox_watch *watch;
    api_metrics *metrics;
} payments_deps;

/* The statements every pooled connection prepares. */
extern const db_stmt payments_stmts[];
extern const size_t payments_nstmts;

/*
 * payments_accept - validate the body of @r and hand it to the committer,
 * which commits the payment, its outbox row and its idempotency record in one
 * transaction shared with the accepts that arrived together; the request is
 * suspended meanwhile. Runs again after the COMMIT and answers: 202 only then.
 */
void payments_accept(const payments_deps *d, http_request *r);

/* payments_get - answer the current state of @payment_id (200 or 404). */
void payments_get(const payments_deps *d, http_request *r, const char *payment_id);

#endif
