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

/* GET /admin/dlq?limit=&after=&q=&event_id=&payment_id=&group=: newest first, keyset-paginated
 * by id, narrowed by the filters given (docs/console.md). */
void dlq_list(dlq *d, http_request *r);

/* GET /admin/dlq/groups: the letters grouped by reason (letters_groups()). */
void dlq_groups(dlq *d, http_request *r);

/* GET /admin/dlq/{id} */
void dlq_get(dlq *d, http_request *r, const char *id);

/*
 * POST /admin/dlq/{id}/replay: the original body, x-attempt 1, confirmed and mandatory;
 * recorded as @actor (api/routes.c: the session's operator, X-Actor or the credential).
 */
void dlq_replay(dlq *d, http_request *r, const char *id, const char *actor);

/* What became of one replay; dlq_replay_result_name() is its name in a replay job. */
typedef enum dlq_replay_result {
    DLQ_REPLAYED,
    DLQ_REPLAY_NOT_FOUND,
    DLQ_REPLAY_ALREADY,
    DLQ_REPLAY_EXPIRED,
    DLQ_REPLAY_UNROUTABLE,
    DLQ_REPLAY_BROKER_DOWN,
    DLQ_REPLAY_DB_DOWN,
} dlq_replay_result;

const char *dlq_replay_result_name(dlq_replay_result res);

/*
 * dlq_replay_one - replay the letter @id on @db (a connection of the caller's, no transaction
 * open): lock it, mark it replayed by @actor (and for @job when not NULL, in the same
 * transaction), publish it confirmed, COMMIT. Its event id into @event_id, and why it was not
 * replayed into @why.
 */
dlq_replay_result dlq_replay_one(dlq *d, db_conn *db, const char *id, const char *actor,
                                 const char *job, char *event_id, size_t event_len, char *why,
                                 size_t len);

/*
 * dlq_replay_batch - dlq_replay_one() of the @n letters @ids in one transaction and one
 * confirm round. True: committed, each one's result in @res. False: nothing was recorded
 * (a letter could not be published, the database or broker failed): replay them one by one.
 */
bool dlq_replay_batch(dlq *d, db_conn *db, const char *const *ids, size_t n, const char *actor,
                      const char *job, dlq_replay_result *res);

/* dlq_queue_depths - every queue of the topology with its messages and consumers, by a passive
 * declare each; NULL when the broker cannot be asked. Owned. */
json_t *dlq_queue_depths(dlq *d);

#endif
