/* worker/relay/relay_lane.h - one batch of the relay: claim, publish, confirm, mark, in one
 * transaction
 */
#ifndef WORKER_RELAY_RELAY_LANE_H
#define WORKER_RELAY_RELAY_LANE_H

#include <stdbool.h>
#include <stddef.h>

#include "shared/amqp/mq.h"
#include "shared/lib/err.h"
#include "shared/lib/metrics.h"
#include "shared/pg/db.h"

/* The relay's series, registered by the relay and updated by its lanes. */
typedef struct relay_metrics {
    metric *published, *confirmed, *returned, *nacked, *timeouts, *batch_size, *confirm_seconds;
} relay_metrics;

/*
 * A lane holds one batch at a time on its own PostgreSQL connection. The relay
 * runs two, so that one lane's rows are claimed and published while the
 * other's confirms are still on their way: the broker never idles while a
 * transaction commits. Confirms are numbered per channel, so every ack or nack
 * belongs to exactly one lane.
 */
typedef struct relay_lane relay_lane;

/* relay_lane_open - a lane with its own connection to @url; @m is borrowed. */
GW_MUSTCHECK gw_err relay_lane_open(const char *url, const relay_metrics *m, relay_lane **out);
void relay_lane_close(relay_lane *l); /* rolls back a batch in hand; accepts NULL */

/* relay_lane_db - the lane's connection, borrowed. */
db_conn *relay_lane_db(relay_lane *l);

/* relay_lane_busy - whether a batch is in hand (claimed, not yet committed). */
bool relay_lane_busy(const relay_lane *l);

/*
 * relay_lane_start - BEGIN, claim up to @limit due rows (FOR UPDATE SKIP
 * LOCKED: the other lane's rows are skipped), publish them all on @mq without
 * waiting. *@claimed is the count; 0 leaves the lane idle (committed). On an
 * AMQP failure the rows published so far stay in hand: finish the lane.
 */
GW_MUSTCHECK gw_err relay_lane_start(relay_lane *l, mq_conn *mq, int limit, size_t *claimed);

/* relay_lane_event - apply an ack, nack or return that may concern this lane's rows. */
void relay_lane_event(relay_lane *l, const mq_event *ev);

/* relay_lane_waiting - published rows still without their ack or nack. */
size_t relay_lane_waiting(const relay_lane *l);

/* relay_lane_age_ms - how long since the lane's first publish. */
long relay_lane_age_ms(const relay_lane *l);

/*
 * relay_lane_finish - mark every row by its fate and COMMIT, in the claiming
 * transaction. Rows still waiting count as nacked (retried after a back-off)
 * when @timed_out, else they stay pending (the connection was lost: they are
 * published again). A failed COMMIT leaves every row pending. The lane is idle
 * afterwards either way.
 */
GW_MUSTCHECK gw_err relay_lane_finish(relay_lane *l, bool timed_out);

/* relay_lane_nacked - whether the broker nacked a row of the batch finished last. */
bool relay_lane_nacked(const relay_lane *l);

#endif
