/* worker/relay/chores.h - what the relay does on timers beside its batches */
#ifndef WORKER_RELAY_CHORES_H
#define WORKER_RELAY_CHORES_H

#include <stdbool.h>

#include "shared/amqp/mq.h"
#include "shared/config.h"
#include "shared/lib/err.h"
#include "shared/lib/metrics.h"
#include "shared/pg/db.h"

/*
 * The chores and their gauges: the outbox backlog and the rearm of lost retry
 * copies every 2 s, the retention purge every minute (in batches of 1,000 rows,
 * again at once while it finds rows), the broker's counts of the settlement
 * queue and its DLQ every 5 s. They run on timers, not per batch, so a relay
 * at its limit still reports its backlog and purges (docs/payments-relay.md).
 */
typedef struct relay_chores relay_chores;

/* relay_chores_new - the chores for @cfg (borrowed), their series in @m (before it is served). */
GW_MUSTCHECK gw_err relay_chores_new(const gw_config *cfg, metrics *m, relay_chores **out);
void relay_chores_free(relay_chores *c); /* accepts NULL */

/*
 * relay_chores_db - the database chores that are due, on @db: a session outside
 * any batch's transaction. @busy: rows are flowing (the purge then goes in small
 * pieces, at most a fifth of the time: shared/lib/pace.h).
 */
void relay_chores_db(relay_chores *c, db_conn *db, bool busy);

/*
 * relay_chores_queues - when due, the depth and the consumers of the settlement
 * queue and its DLQ (passive queue.declare on @mq, between batches). Frames that
 * came meanwhile stay queued in @mq for the caller. GW_ERR_MQ: reconnect.
 */
GW_MUSTCHECK gw_err relay_chores_queues(relay_chores *c, mq_conn *mq);

#endif
