/* worker/relay/relay_lane.c - a batch from claim to COMMIT; never a mark without a confirm */
#include "worker/relay/relay_lane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shared/failpoint.h"
#include "shared/lib/log.h"
#include "shared/mq_topology.h"
#include "worker/relay/outbox.h"

struct relay_lane {
    db_conn *db;
    const relay_metrics *m;
    outbox_batch *b; /* NULL: idle */
    size_t waiting;  /* published rows without their ack or nack */
    bool nacked;     /* the last finished batch had a nack */
    struct timespec t0;
};

gw_err relay_lane_open(const char *url, const relay_metrics *m, relay_lane **out)
{
    relay_lane *l = calloc(1, sizeof *l);
    gw_err err;

    if (l == NULL)
        return GW_ERR_NOMEM;
    l->m = m;
    err = db_open(url, "payments-relay", outbox_stmts, outbox_nstmts, false, &l->db);
    return GW_BUILT(err, l, relay_lane_close, out);
}

void relay_lane_close(relay_lane *l)
{
    if (l == NULL)
        return;
    if (l->b != NULL)
        db_rollback(l->db); /* unmarked rows stay pending: published again later */
    outbox_batch_free(l->b);
    db_close(l->db);
    free(l);
}

db_conn *relay_lane_db(relay_lane *l)
{
    return l->db;
}

bool relay_lane_busy(const relay_lane *l)
{
    return l->b != NULL;
}

size_t relay_lane_waiting(const relay_lane *l)
{
    return l->b != NULL ? l->waiting : 0;
}

long relay_lane_age_ms(const relay_lane *l)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - l->t0.tv_sec) * 1000 + (now.tv_nsec - l->t0.tv_nsec) / 1000000;
}

gw_err relay_lane_start(relay_lane *l, mq_conn *mq, int limit, size_t *claimed)
{
    outbox_batch *b = NULL;
    gw_err err;

    *claimed = 0;
    if ((err = outbox_begin_claim(l->db, limit, &b)) != GW_OK) {
        db_rollback(l->db);
        return err;
    }
    *claimed = outbox_batch_len(b);
    if (*claimed == 0) {
        outbox_batch_free(b);
        return db_commit(l->db);
    }
    metrics_observe(l->m->batch_size, (double)*claimed);
    l->b = b;
    l->waiting = 0;
    clock_gettime(CLOCK_MONOTONIC, &l->t0);
    for (size_t i = 0; i < *claimed; i++) {
        outbox_row *row = outbox_batch_row(b, i);
        mq_message m = {
            .exchange = MQ_EXCHANGE_EVENTS,
            .routing_key = row->routing_key,
            .message_id = row->event_id,
            .type = MQ_MESSAGE_TYPE,
            .body = row->body,
            .len = row->body_len,
            .attempt = row->attempt,
            .traceparent = row->traceparent,
        };

        /* no waiting between publishes: the confirms are collected as they come */
        if ((err = mq_publish(mq, &m, &row->seq)) != GW_OK) {
            row->seq = 0;
            return err; /* the rest stays pending */
        }
        metrics_add(l->m->published, 1);
        l->waiting++;
    }
    return GW_OK;
}

/* Apply one ack or nack (maybe "multiple") to the rows still waiting. */
static void settle_confirm(relay_lane *l, const mq_event *ev)
{
    for (size_t i = 0; i < outbox_batch_len(l->b); i++) {
        outbox_row *row = outbox_batch_row(l->b, i);

        if (row->seq == 0 || row->settled)
            continue;
        if (!(row->seq == ev->tag || (ev->multiple && row->seq <= ev->tag)))
            continue;
        row->settled = true;
        l->waiting--;
        if (ev->kind == MQ_EV_NACK) {
            row->fate = OUTBOX_NACKED;
            snprintf(row->why, sizeof row->why, "nacked by the broker");
        } else if (row->fate != OUTBOX_RETURNED) {
            row->fate = OUTBOX_CONFIRMED; /* acked without a return: routed */
        }
    }
    if (l->waiting == 0)
        metrics_observe(l->m->confirm_seconds, (double)relay_lane_age_ms(l) / 1000.0);
}

/* A basic.return names no delivery tag: find the row by message_id (= event_id). */
static void note_return(relay_lane *l, const mq_event *ev)
{
    for (size_t i = 0; i < outbox_batch_len(l->b); i++) {
        outbox_row *row = outbox_batch_row(l->b, i);

        if (!row->settled && row->seq != 0 && strcmp(row->event_id, ev->message_id) == 0) {
            row->fate = OUTBOX_RETURNED; /* its ack follows */
            snprintf(row->why, sizeof row->why, "%d %s", ev->reply_code, ev->reply_text);
            return;
        }
    }
}

void relay_lane_event(relay_lane *l, const mq_event *ev)
{
    if (l->b == NULL)
        return;
    if (ev->kind == MQ_EV_RETURN)
        note_return(l, ev);
    else if (ev->kind == MQ_EV_ACK || ev->kind == MQ_EV_NACK)
        settle_confirm(l, ev);
}

static void count_fates(relay_lane *l)
{
    for (size_t i = 0; i < outbox_batch_len(l->b); i++) {
        outbox_row *row = outbox_batch_row(l->b, i);

        if (row->fate == OUTBOX_CONFIRMED) {
            metrics_add(l->m->confirmed, 1);
        } else if (row->fate == OUTBOX_RETURNED) {
            metrics_add(l->m->returned, 1);
            log_info("payment_unroutable", "event_id=%s payment_id=%s reply=\"%s\"", row->event_id,
                     row->payment_id, row->why);
        } else if (row->fate == OUTBOX_NACKED && row->settled) {
            metrics_add(l->m->nacked, 1);
            l->nacked = true;
        }
    }
}

gw_err relay_lane_finish(relay_lane *l, bool timed_out)
{
    gw_err err;

    l->nacked = false;
    for (size_t i = 0; i < outbox_batch_len(l->b); i++) {
        outbox_row *row = outbox_batch_row(l->b, i);

        if (row->seq == 0 || row->settled)
            continue;
        if (timed_out) {
            metrics_add(l->m->timeouts, 1);
            row->fate = OUTBOX_NACKED;
            snprintf(row->why, sizeof row->why, "no confirm in time");
        } else {
            row->fate = OUTBOX_UNSETTLED; /* connection lost: published again later */
        }
    }
    /* relay.before_commit comes before the marks now: they and the COMMIT are one round trip */
    if ((err = failpoint_hit("relay.after_publish")) == GW_OK &&
        (err = failpoint_hit("relay.before_commit")) == GW_OK &&
        (err = outbox_mark_commit(l->db, l->b)) == GW_OK)
        count_fates(l);
    else
        db_rollback(l->db); /* nothing marked: every row stays pending */
    outbox_batch_free(l->b);
    l->b = NULL;
    return err;
}

bool relay_lane_nacked(const relay_lane *l)
{
    return l->nacked;
}
