/* api/admin/dlq.h - the admin's dead-letter endpoints: drain the DLQ into PostgreSQL, list,
 * get and replay; the answers, built on dlq_broker, letters and replay */
#ifndef API_ADMIN_DLQ_H
#define API_ADMIN_DLQ_H

#include "api/api_metrics.h"
#include "shared/config.h"
#include "shared/http/http.h"
#include "shared/pg/db_pool.h"

typedef struct dlq dlq;

/*
 * dlq_new - the admin side of the DLQ for @cfg; @cfg, @pool and @m are borrowed.
 * Owns one dlq_broker: opened on first use, one admin call at a time.
 */
GW_MUSTCHECK gw_err dlq_new(const gw_config *cfg, db_pool *pool, api_metrics *m, dlq **out);
void dlq_free(dlq *d); /* accepts NULL */

/* POST /admin/dlq/drain?max=N: basic.get up to N, store each, COMMIT, then ack. */
void dlq_drain(dlq *d, http_request *r);

/* GET /admin/dlq?limit=&after=: newest first, keyset-paginated by id. */
void dlq_list(dlq *d, http_request *r);

/* GET /admin/dlq/{id} */
void dlq_get(dlq *d, http_request *r, const char *id);

/* POST /admin/dlq/{id}/replay: the original body, x-attempt 1, confirmed and mandatory. */
void dlq_replay(dlq *d, http_request *r, const char *id);

#endif
