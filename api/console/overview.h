/* api/console/overview.h - GET /admin/overview: the live numbers of the console's first page */
#ifndef API_CONSOLE_OVERVIEW_H
#define API_CONSOLE_OVERVIEW_H

#include "api/admin/dlq.h"
#include "api/api_metrics.h"
#include "shared/http/http.h"
#include "shared/pg/db_pool.h"

/*
 * overview_reply - the outbox backlog and its oldest age, the dead letters stored and not
 * replayed, settles in the last minute (PostgreSQL), and each queue's depth and consumers
 * (RabbitMQ, null when it cannot be asked). Every figure is read through an index: the
 * page asks every 2 s, on tables of millions of rows.
 */
void overview_reply(db_pool *pool, dlq *d, api_metrics *m, http_request *r);

#endif
