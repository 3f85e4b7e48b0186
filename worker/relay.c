/* worker/relay.c - one batch at a time: claim, publish all, collect confirms, mark, COMMIT */
#include "worker/relay.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shared/backoff.h"
#include "shared/db.h"
#include "shared/failpoint.h"
#include "shared/log.h"
#include "shared/mq.h"
#include "shared/mq_topology.h"
#include "worker/outbox.h"

#define NOTIFY_CHANNEL "paygw_outbox"
#define HOUSEKEEPING_S 60
#define BACKLOG_S      2
#define PURGE_LIMIT    1000

struct relay {
    const gw_config *cfg;
    health *health;
    db_conn *db;
    mq_conn *mq;
    bool listening;
    metric *published, *confirmed, *returned, *nacked, *timeouts, *batch_size, *confirm_seconds;
    metric *backlog, *oldest_age, *purged;
    time_t next_housekeeping, next_backlog;
};

static const double batch_bounds[] = {1, 2, 5, 10, 25, 50, 100, 250, 500};

gw_err relay_new(const gw_config *cfg, metrics *m, health *h, relay **out)
{
    relay *r = calloc(1, sizeof *r);

    if (r == NULL)
        return GW_ERR_NOMEM;
    r->cfg = cfg;
    r->health = h;
    r->published = metrics_counter(m, "paygw_relay_published_total", NULL,
                                   "Messages handed to the broker (not yet confirmed).");
    r->confirmed = metrics_counter(m, "paygw_relay_confirmed_total", NULL,
                                   "Publishes the broker acked and routed; rows marked published.");
    r->returned = metrics_counter(m, "paygw_relay_returned_total", NULL,
                                  "Publishes the broker returned as unroutable (basic.return).");
    r->nacked = metrics_counter(m, "paygw_relay_nacked_total", NULL,
                                "Publishes the broker nacked; rows left pending.");
    r->timeouts = metrics_counter(m, "paygw_relay_confirm_timeouts_total", NULL,
                                  "Publishes without a confirm in time; rows left pending.");
    r->batch_size = metrics_histogram(m, "paygw_relay_batch_size", NULL, "Rows claimed per batch.",
                                      batch_bounds, sizeof batch_bounds / sizeof batch_bounds[0]);
    r->confirm_seconds = metrics_histogram(m, "paygw_relay_confirm_duration_seconds", NULL,
                                           "From the first publish of a batch to its last confirm.",
                                           metrics_latency_bounds, metrics_latency_nbounds);
    r->backlog = metrics_gauge(m, "paygw_outbox_backlog", NULL, "Unpublished outbox rows.");
    r->oldest_age = metrics_gauge(m, "paygw_outbox_oldest_pending_age_seconds", NULL,
                                  "Age of the oldest unpublished outbox row.");
    r->purged = metrics_counter(m, "paygw_relay_outbox_purged_total", NULL,
                                "Published outbox rows deleted after the retention.");
    *out = r;
    return GW_OK;
}

void relay_set_health(relay *r, health *h)
{
    r->health = h;
}

static void drop_db(relay *r)
{
    db_close(r->db);
    r->db = NULL;
    r->listening = false;
    health_set_db(r->health, false);
}

static void drop_mq(relay *r)
{
    mq_close(r->mq);
    r->mq = NULL;
    health_set_mq(r->health, false);
}

void relay_free(relay *r)
{
    if (r == NULL)
        return;
    drop_db(r);
    drop_mq(r);
    free(r);
}

static gw_err connect_db(relay *r)
{
    gw_err err;

    if (r->db != NULL && db_ensure(r->db) == GW_OK && r->listening)
        return GW_OK;
    if (r->db == NULL && (err = db_open(r->cfg->database_url, "payments-relay", outbox_stmts,
                                        outbox_nstmts, false, &r->db)) != GW_OK)
        return err;
    if ((err = db_ensure(r->db)) != GW_OK)
        return err;
    /* after every reconnect: a LISTEN does not survive its session */
    if ((err = db_exec(r->db, "LISTEN " NOTIFY_CHANNEL)) != GW_OK)
        return err;
    r->listening = true;
    health_set_db(r->health, true);
    return GW_OK;
}

static gw_err connect_mq(relay *r)
{
    gw_err err;

    if (r->mq != NULL && mq_fd(r->mq) >= 0)
        return GW_OK;
    drop_mq(r);
    if ((err = mq_open(r->cfg->amqp_url, "payments-relay", true, &r->mq)) != GW_OK)
        return err;
    if ((err = mq_topology_declare(r->mq, r->cfg)) != GW_OK) {
        drop_mq(r);
        return err;
    }
    health_set_mq(r->health, true);
    return GW_OK;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Apply one ack or nack (maybe "multiple") to the rows still waiting; returns rows settled. */
static size_t settle_confirm(outbox_batch *b, const mq_event *ev)
{
    size_t n = 0;

    for (size_t i = 0; i < outbox_batch_len(b); i++) {
        outbox_row *row = outbox_batch_row(b, i);

        if (row->seq == 0 || row->settled)
            continue;
        if (!(row->seq == ev->tag || (ev->multiple && row->seq <= ev->tag)))
            continue;
        row->settled = true;
        n++;
        if (ev->kind == MQ_EV_NACK) {
            row->fate = OUTBOX_NACKED;
            snprintf(row->why, sizeof row->why, "nacked by the broker");
        } else if (row->fate != OUTBOX_RETURNED) {
            row->fate = OUTBOX_CONFIRMED; /* acked without a return: routed */
        }
    }
    return n;
}

/* A basic.return names no delivery tag: find the row by message_id (= event_id). */
static void note_return(outbox_batch *b, const mq_event *ev)
{
    for (size_t i = 0; i < outbox_batch_len(b); i++) {
        outbox_row *row = outbox_batch_row(b, i);

        if (!row->settled && row->seq != 0 && strcmp(row->event_id, ev->message_id) == 0) {
            row->fate = OUTBOX_RETURNED; /* its ack follows */
            snprintf(row->why, sizeof row->why, "%d %s", ev->reply_code, ev->reply_text);
            return;
        }
    }
}

/*
 * collect_confirms - read until every published row is settled or the
 * deadline passes. Rows without a confirm then count as nacked (retried after
 * a back-off); a returned row whose ack never came stays pending.
 */
static gw_err collect_confirms(relay *r, outbox_batch *b, size_t waiting)
{
    struct timespec t0;
    gw_err err = GW_OK;
    mq_event ev;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (waiting > 0) {
        int left = RELAY_CONFIRM_TIMEOUT_MS - (int)(seconds_since(&t0) * 1000);

        if (left <= 0) {
            err = GW_ERR_RETRY;
            break;
        }
        err = mq_next_event(r->mq, left, &ev);
        if (err == GW_ERR_RETRY)
            continue;
        if (err != GW_OK)
            break; /* connection lost: what was acked so far is still marked */
        if (ev.kind == MQ_EV_RETURN)
            note_return(b, &ev);
        else if (ev.kind == MQ_EV_ACK || ev.kind == MQ_EV_NACK)
            waiting -= settle_confirm(b, &ev);
    }
    if (waiting == 0)
        metrics_observe(r->confirm_seconds, seconds_since(&t0));
    for (size_t i = 0; i < outbox_batch_len(b); i++) {
        outbox_row *row = outbox_batch_row(b, i);

        if (row->seq == 0 || row->settled)
            continue;
        if (err == GW_ERR_RETRY) {
            metrics_add(r->timeouts, 1);
            row->fate = OUTBOX_NACKED;
            snprintf(row->why, sizeof row->why, "no confirm within %d ms",
                     RELAY_CONFIRM_TIMEOUT_MS);
        } else {
            row->fate = OUTBOX_UNSETTLED; /* connection lost: republished later */
        }
    }
    return err;
}

static void count_fates(relay *r, outbox_batch *b)
{
    for (size_t i = 0; i < outbox_batch_len(b); i++) {
        outbox_row *row = outbox_batch_row(b, i);

        if (row->fate == OUTBOX_CONFIRMED) {
            metrics_add(r->confirmed, 1);
        } else if (row->fate == OUTBOX_RETURNED) {
            metrics_add(r->returned, 1);
            log_info("payment_unroutable", "event_id=%s payment_id=%s reply=\"%s\"", row->event_id,
                     row->payment_id, row->why);
        } else if (row->fate == OUTBOX_NACKED && row->settled) {
            metrics_add(r->nacked, 1);
        }
    }
}

/*
 * relay_batch - one transaction: claim, publish every row without waiting in
 * between, collect the confirms, mark, COMMIT. A crash before COMMIT leaves
 * the rows pending: they are published again (the worker's inbox dedupes).
 * Returns the rows claimed in *@claimed.
 */
static gw_err relay_batch(relay *r, size_t *claimed)
{
    outbox_batch *b = NULL;
    size_t waiting = 0;
    gw_err err, mq_err = GW_OK;

    *claimed = 0;
    if ((err = db_begin(r->db, NULL)) != GW_OK)
        return err;
    if ((err = outbox_claim(r->db, RELAY_BATCH_SIZE, &b)) != GW_OK)
        goto rollback;
    *claimed = outbox_batch_len(b);
    if (*claimed == 0) {
        outbox_batch_free(b);
        return db_exec(r->db, "COMMIT");
    }
    metrics_observe(r->batch_size, (double)*claimed);
    for (size_t i = 0; i < *claimed; i++) {
        outbox_row *row = outbox_batch_row(b, i);
        mq_message m = {
            .exchange = MQ_EXCHANGE_EVENTS,
            .routing_key = row->routing_key,
            .message_id = row->event_id,
            .type = MQ_MESSAGE_TYPE,
            .body = row->body,
            .len = row->body_len,
            .attempt = 1,
            .traceparent = row->traceparent,
        };

        if ((mq_err = mq_publish(r->mq, &m, &row->seq)) != GW_OK) {
            row->seq = 0;
            break; /* the rest stays pending */
        }
        metrics_add(r->published, 1);
        waiting++;
    }
    if (waiting > 0) {
        gw_err cerr = collect_confirms(r, b, waiting);
        if (cerr != GW_OK && cerr != GW_ERR_RETRY)
            mq_err = cerr;
        if (cerr == GW_ERR_RETRY)
            mq_err = GW_ERR_MQ; /* late confirms would confuse the next batch: reconnect */
    }
    if ((err = failpoint_hit("relay.after_publish")) != GW_OK)
        goto rollback;
    if ((err = outbox_mark(r->db, b)) != GW_OK)
        goto rollback;
    if ((err = failpoint_hit("relay.before_commit")) != GW_OK)
        goto rollback;
    if ((err = db_exec(r->db, "COMMIT")) != GW_OK)
        goto rollback;
    count_fates(r, b);
    outbox_batch_free(b);
    return mq_err;
rollback:
    db_rollback(r->db);
    outbox_batch_free(b);
    return err;
}

static void housekeeping(relay *r)
{
    time_t now = time(NULL);
    long pending = 0, deleted = 0;
    double age = 0;

    if (now >= r->next_backlog) {
        r->next_backlog = now + BACKLOG_S;
        if (outbox_backlog(r->db, &pending, &age) == GW_OK) {
            metrics_set(r->backlog, (double)pending);
            metrics_set(r->oldest_age, age);
        }
    }
    if (now >= r->next_housekeeping) {
        r->next_housekeeping = now + HOUSEKEEPING_S;
        /* small batches: a big DELETE would hold locks the accepts need */
        if (outbox_purge(r->db, r->cfg->outbox_retention_hours, PURGE_LIMIT, &deleted) == GW_OK &&
            deleted > 0) {
            metrics_add(r->purged, (uint64_t)deleted);
            log_info("outbox_purged", "rows=%ld retention_hours=%d", deleted,
                     r->cfg->outbox_retention_hours);
            r->next_housekeeping = now; /* more may be left */
        }
    }
}

/* Wait for a NOTIFY, a broker frame, or the polling fallback, whichever comes first. */
static gw_err wait_for_work(relay *r)
{
    struct pollfd fds[2] = {{PQsocket(db_pg(r->db)), POLLIN, 0}, {mq_fd(r->mq), POLLIN, 0}};
    PGnotify *n;
    mq_event ev;
    gw_err err;
    bool woken = false;

    /*
     * A NOTIFY sent while our batch transaction was open is delivered at its
     * COMMIT: libpq read it off the socket with the COMMIT's answer, so poll()
     * would not see it. PQnotifies() parses what is buffered without reading.
     */
    while ((n = PQnotifies(db_pg(r->db))) != NULL) {
        PQfreemem(n);
        woken = true;
    }
    if (woken)
        return GW_OK;
    if (poll(fds, 2, RELAY_POLL_MS) < 0)
        return GW_OK; /* EINTR: the loop checks the stop flag */
    if (fds[1].revents) {
        /* heartbeats, connection.blocked, or a close */
        err = mq_next_event(r->mq, 1, &ev);
        if (err == GW_ERR_MQ)
            return err;
    }
    if (fds[0].revents) {
        if (!PQconsumeInput(db_pg(r->db)))
            return GW_ERR_DB;
        while ((n = PQnotifies(db_pg(r->db))) != NULL)
            PQfreemem(n); /* one wake-up is enough, however many came */
    }
    return GW_OK;
}

void relay_run(relay *r, volatile sig_atomic_t *stop)
{
    backoff bo;
    size_t claimed;
    gw_err err;

    backoff_init(&bo, 200, 10000);
    while (!*stop) {
        if ((err = connect_db(r)) != GW_OK) {
            drop_db(r);
            backoff_wait(&bo, stop);
            continue;
        }
        if ((err = connect_mq(r)) != GW_OK) {
            backoff_wait(&bo, stop);
            continue;
        }
        if (mq_blocked(r->mq)) {
            /* the broker is out of memory or disk: publishing now would hang */
            mq_event ev;
            if (mq_next_event(r->mq, 500, &ev) == GW_ERR_MQ)
                drop_mq(r);
            continue;
        }
        err = relay_batch(r, &claimed);
        if (err == GW_ERR_MQ) {
            drop_mq(r);
            backoff_wait(&bo, stop);
            continue;
        }
        if (err != GW_OK) {
            if (PQstatus(db_pg(r->db)) != CONNECTION_OK)
                drop_db(r);
            backoff_wait(&bo, stop);
            continue;
        }
        backoff_reset(&bo);
        housekeeping(r);
        if (claimed == RELAY_BATCH_SIZE)
            continue; /* more is waiting */
        err = wait_for_work(r);
        if (err == GW_ERR_MQ)
            drop_mq(r);
        else if (err == GW_ERR_DB)
            drop_db(r);
    }
}
