/* worker/relay/chores.c - the backlog gauges, the rearm, the purge and the queue counts */
#include "worker/relay/chores.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shared/lib/log.h"
#include "shared/lib/pace.h"
#include "shared/mq_topology.h"
#include "worker/relay/outbox.h"

#define BACKLOG_S      2
#define HOUSEKEEPING_S 60
#define QUEUES_S       5 /* the broker's counts for paygw_queue_messages and _consumers */
#define PURGE_LIMIT    1000
#define PURGE_BUSY     200 /* a lane in flight waits behind one piece: 10-20 ms of cold rows */

/* The queues whose depth and consumers the relay reports, in the order of the gauges. */
static const char *const watched_queues[2] = {MQ_QUEUE_SETTLEMENT, MQ_QUEUE_DLQ};

struct relay_chores {
    const gw_config *cfg;
    metric *backlog, *oldest_age, *purged, *rearmed;
    metric *queue_messages[2], *queue_consumers[2]; /* [0] settlement, [1] its DLQ */
    time_t next_backlog, next_queues;
    pace purge;          /* in pieces: shared/lib/pace.h */
    int64_t purge_after; /* below this outbox id every row is deleted or unroutable */
};

gw_err relay_chores_new(const gw_config *cfg, metrics *m, relay_chores **out)
{
    relay_chores *c = calloc(1, sizeof *c);

    if (c == NULL)
        return GW_ERR_NOMEM;
    c->cfg = cfg;
    pace_init(&c->purge, HOUSEKEEPING_S * 1000L);
    c->backlog = metrics_gauge(m, "paygw_outbox_backlog", NULL, "Unpublished outbox rows.");
    c->oldest_age = metrics_gauge(m, "paygw_outbox_oldest_pending_age_seconds", NULL,
                                  "Age of the oldest unpublished outbox row.");
    c->purged = metrics_counter(m, "paygw_relay_outbox_purged_total", NULL,
                                "Published outbox rows deleted after the retention.");
    c->rearmed =
        metrics_counter(m, "paygw_relay_retries_rearmed_total", NULL,
                        "Retry copies that never came back, published again from the outbox.");
    for (int i = 0; i < 2; i++) {
        char labels[64];

        snprintf(labels, sizeof labels, "queue=\"%s\"", watched_queues[i]);
        c->queue_messages[i] =
            metrics_gauge(m, "paygw_queue_messages", labels,
                          "Ready messages in the queue (passive queue.declare, every 5 s).");
        c->queue_consumers[i] =
            metrics_gauge(m, "paygw_queue_consumers", labels,
                          "Consumers of the queue (passive queue.declare, every 5 s).");
    }
    *out = c;
    return GW_OK;
}

void relay_chores_free(relay_chores *c)
{
    free(c);
}

void relay_chores_db(relay_chores *c, db_conn *db, bool busy)
{
    time_t now = time(NULL);
    long pending = 0, deleted = 0, rearmed = 0;
    double age = 0;

    if (now >= c->next_backlog) {
        c->next_backlog = now + BACKLOG_S;
        if (outbox_backlog(db, &pending, &age) == GW_OK) {
            metrics_set(c->backlog, (double)pending);
            metrics_set(c->oldest_age, age);
        }
        if (outbox_rearm(db, c->cfg->retry_lost_after_s, PURGE_LIMIT, &rearmed) == GW_OK &&
            rearmed > 0) {
            metrics_add(c->rearmed, (uint64_t)rearmed);
            log_warn("retry_copies_rearmed", "payments=%ld after_s=%d", rearmed,
                     c->cfg->retry_lost_after_s);
        }
    }
    if (pace_begin(&c->purge, pace_now_ms())) {
        int64_t from = c->purge_after;
        gw_err err;

        /* small pieces: a big DELETE would hold locks the accepts need, and the lanes wait */
        err = outbox_purge(db, c->cfg->outbox_retention_hours, busy ? PURGE_BUSY : PURGE_LIMIT,
                           &c->purge_after, &deleted);
        if (err == GW_OK && deleted > 0) {
            metrics_add(c->purged, (uint64_t)deleted);
            log_info("outbox_purged", "rows=%ld retention_hours=%d busy=%d", deleted,
                     c->cfg->outbox_retention_hours, busy);
        }
        pace_end(&c->purge, pace_now_ms(), err == GW_OK && (deleted > 0 || c->purge_after > from),
                 busy);
    }
}

gw_err relay_chores_queues(relay_chores *c, mq_conn *mq)
{
    time_t now = time(NULL);
    uint32_t messages, consumers;
    gw_err err;

    if (now < c->next_queues)
        return GW_OK;
    c->next_queues = now + QUEUES_S;
    for (int i = 0; i < 2; i++) {
        if ((err = mq_queue_counts(mq, watched_queues[i], &messages, &consumers)) != GW_OK)
            return err;
        metrics_set(c->queue_messages[i], messages);
        metrics_set(c->queue_consumers[i], consumers);
    }
    return GW_OK;
}
