/* worker/relay/relay.c - two lanes of batches: claim, publish, confirms, mark, COMMIT */
#include "worker/relay/relay.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shared/amqp/mq.h"
#include "shared/failpoint.h"
#include "shared/lib/backoff.h"
#include "shared/lib/log.h"
#include "shared/mq_topology.h"
#include "shared/pg/db.h"
#include "worker/relay/chores.h"
#include "worker/relay/confirm_clock.h"
#include "worker/relay/outbox.h"
#include "worker/relay/relay_lane.h"
#include "worker/relay/wakeup.h"

#define LANES 2

struct relay {
    const gw_config *cfg;
    health *health;
    relay_lane *lanes[LANES]; /* lanes[0]'s connection: housekeeping without a LISTEN session */
    db_conn *db;              /* borrowed from lanes[0] */
    relay_wakeup *wake;       /* the LISTEN session */
    bool woken;               /* a NOTIFY came (or may have been lost): claim */
    time_t wake_tried;        /* the last attempt to open the LISTEN session */
    int oldest;               /* the lane whose batch went out first */
    mq_conn *mq;
    relay_metrics m;
    relay_chores *chores;
    metric *blocked, *overlapped;
    long unblocked_ms; /* when the broker last lifted a block */
    long blocked_ms;   /* when the current block began */
    long confirmed_ms; /* when the last ack or nack came */
    long stop_ms;      /* when the stop was first seen; 0 before */
    long claimed_ms;   /* when a claim last found rows */
};

static long now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

gw_err relay_new(const gw_config *cfg, metrics *m, health *h, relay **out)
{
    relay *r = calloc(1, sizeof *r);

    if (r == NULL)
        return GW_ERR_NOMEM;
    r->cfg = cfg;
    r->health = h;
    mq_metrics_attach(m);
    r->m.published = metrics_counter(m, "paygw_relay_published_total", NULL,
                                     "Messages handed to the broker (not yet confirmed).");
    r->m.confirmed =
        metrics_counter(m, "paygw_relay_confirmed_total", NULL,
                        "Publishes the broker acked and routed; rows marked published.");
    r->m.returned = metrics_counter(m, "paygw_relay_returned_total", NULL,
                                    "Publishes the broker returned as unroutable (basic.return).");
    r->m.nacked = metrics_counter(m, "paygw_relay_nacked_total", NULL,
                                  "Publishes the broker nacked; rows left pending.");
    r->m.timeouts = metrics_counter(m, "paygw_relay_confirm_timeouts_total", NULL,
                                    "Publishes without a confirm in time; rows left pending.");
    r->m.batch_size =
        metrics_histogram(m, "paygw_relay_batch_size", NULL, "Rows claimed per batch.",
                          metrics_batch_bounds, metrics_batch_nbounds);
    r->m.confirm_seconds =
        metrics_histogram(m, "paygw_relay_confirm_duration_seconds", NULL,
                          "From the first publish of a batch to its last confirm.",
                          metrics_latency_bounds, metrics_latency_nbounds);
    r->overlapped = metrics_counter(
        m, "paygw_relay_batches_overlapped_total", NULL,
        "Batches published while another lane's batch was still waiting for its confirms.");
    r->blocked = metrics_gauge(m, "paygw_relay_broker_blocked", NULL,
                               "1 while the broker blocks publishing (memory or disk alarm).");
    if (relay_chores_new(cfg, m, &r->chores) != GW_OK) {
        free(r);
        return GW_ERR_NOMEM;
    }
    *out = r;
    return GW_OK;
}

void relay_set_health(relay *r, health *h)
{
    r->health = h;
}

static void drop_db(relay *r)
{ /* a lane's rollback leaves its rows pending; the broker's confirms for them no longer matter */
    for (int i = 0; i < LANES; i++) {
        relay_lane_close(r->lanes[i]);
        r->lanes[i] = NULL;
    }
    r->db = NULL;
    relay_wakeup_close(r->wake);
    r->wake = NULL;
    health_set_db(r->health, false);
}

static void finish_all(relay *r, bool timed_out);

/*
 * drop_mq - close the broker connection. Delivery tags are numbered per
 * channel, so a lane never outlives the channel that published its batch: what
 * was confirmed is marked, the rest stays pending (published again later).
 */
static void drop_mq(relay *r)
{
    finish_all(r, false);
    mq_close(r->mq);
    r->mq = NULL;
    metrics_set(r->blocked, 0);
    health_set_mq(r->health, false);
}

void relay_free(relay *r)
{
    if (r == NULL)
        return;
    drop_db(r);
    drop_mq(r);
    relay_chores_free(r->chores);
    free(r);
}

static bool any_busy(const relay *r)
{
    for (int i = 0; i < LANES; i++)
        if (r->lanes[i] != NULL && relay_lane_busy(r->lanes[i]))
            return true;
    return false;
}

static gw_err connect_db(relay *r)
{
    gw_err err;

    /* A busy lane is inside its batch's transaction, which db_ensure() would roll back (its
     * rows unlocked, claimed again by the other lane): its own statements find a lost server. */
    if (r->db == NULL || (!any_busy(r) && db_ensure(r->db) != GW_OK)) {
        for (int i = 0; i < LANES; i++) {
            if (r->lanes[i] == NULL &&
                (err = relay_lane_open(r->cfg->database_url, &r->m, &r->lanes[i])) != GW_OK)
                return err;
            if ((err = db_ensure(relay_lane_db(r->lanes[i]))) != GW_OK)
                return err;
        }
        r->db = relay_lane_db(r->lanes[0]);
        health_set_db(r->health, true);
    }
    /* without its LISTEN session the relay still polls (RELAY_POLL_MS), and tries again here
     * once a second */
    if (r->wake == NULL && time(NULL) != r->wake_tried) {
        r->wake_tried = time(NULL);
        if (relay_wakeup_open(r->cfg->database_url, outbox_stmts, outbox_nstmts, &r->wake) == GW_OK)
            r->woken = true; /* what was notified while no one listened */
    }
    return GW_OK;
}

static gw_err connect_mq(relay *r)
{
    gw_err err;

    if (r->mq != NULL && mq_fd(r->mq) >= 0)
        return GW_OK;
    drop_mq(r);
    if ((err = mq_open(r->cfg->amqp_url, r->cfg->amqp_cacert, "payments-relay", true, &r->mq)) !=
        GW_OK)
        return err;
    if ((err = mq_topology_declare(r->mq, r->cfg)) != GW_OK) {
        drop_mq(r);
        return err;
    }
    health_set_mq(r->health, true);
    return GW_OK;
}

/* Finish every lane in hand (after the broker went away, or at stop): keep what was confirmed. */
static void finish_all(relay *r, bool timed_out)
{
    for (int i = 0; i < LANES; i++)
        if (r->lanes[i] != NULL && relay_lane_busy(r->lanes[i]) &&
            relay_lane_finish(r->lanes[i], timed_out) != GW_OK)
            log_warn("relay_batch_not_marked", "lane=%d", i);
}

/*
 * pump_event - read one broker event within @timeout_ms and hand it to the
 * lanes: a tag or a message_id names one lane's row, blocked or not.
 * GW_ERR_RETRY on timeout; GW_ERR_MQ when the connection is gone.
 */
static gw_err pump_event(relay *r, int timeout_ms)
{
    mq_event ev;
    gw_err err = mq_next_event(r->mq, timeout_ms, &ev);

    if (err != GW_OK)
        return err;
    if (ev.kind == MQ_EV_ACK || ev.kind == MQ_EV_NACK) {
        r->confirmed_ms = now_ms();
    } else if (ev.kind == MQ_EV_BLOCKED) {
        r->blocked_ms = now_ms();
        metrics_set(r->blocked, 1);
        log_warn("relay_blocked", "batches_in_flight=%d", any_busy(r));
    } else if (ev.kind == MQ_EV_UNBLOCKED) {
        r->unblocked_ms = now_ms();
        metrics_set(r->blocked, 0);
        log_info("relay_unblocked", "blocked_ms=%ld", r->unblocked_ms - r->blocked_ms);
    }
    for (int i = 0; i < LANES; i++)
        relay_lane_event(r->lanes[i], &ev);
    return GW_OK;
}

/* confirm_wait_ms - how long to wait for the next confirm; <= 0: give the oldest batch up. */
static long confirm_wait_ms(relay *r, relay_lane *old, volatile sig_atomic_t *stop)
{
    long now = now_ms();
    confirm_clock c;

    if (*stop && r->stop_ms == 0)
        r->stop_ms = now;
    c = (confirm_clock){
        .claimed = now - relay_lane_age_ms(old),
        .unblocked = r->unblocked_ms,
        .confirmed = r->confirmed_ms,
        .blocked = mq_blocked(r->mq) ? r->blocked_ms : 0,
        .stopped = r->stop_ms,
    };
    return confirm_clock_left_ms(&c, now);
}

/*
 * start_lanes - start a batch in every idle lane while the claims come back
 * full (unless stopping or blocked). *@more says a full batch was claimed.
 */
static gw_err start_lanes(relay *r, volatile sig_atomic_t *stop, bool *more)
{
    size_t claimed;
    gw_err err;

    r->woken = false; /* these claims see every row committed before them */
    for (int i = 0; i < LANES && !*stop && !mq_blocked(r->mq); i++) {
        int k = (r->oldest + i) % LANES;
        bool beside = any_busy(r);

        if (relay_lane_busy(r->lanes[k]))
            continue;
        if (!beside)
            r->oldest = k;
        err = relay_lane_start(r->lanes[k], r->mq, RELAY_BATCH_SIZE, &claimed);
        if (err != GW_OK)
            return err; /* GW_ERR_MQ: drop_mq() finishes the lane */
        if (claimed > 0)
            r->claimed_ms = now_ms();
        if (beside && claimed > 0)
            metrics_add(r->overlapped, 1);
        *more = claimed == RELAY_BATCH_SIZE;
        if (!*more)
            break; /* the outbox is drained: another lane would claim nothing */
    }
    return GW_OK;
}

/*
 * take_wakeup - the NOTIFYs that arrived; a broken LISTEN session is closed
 * (connect_db() opens a new one) and counts as a wake-up.
 */
static void take_wakeup(relay *r)
{
    bool woken = false;

    if (relay_wakeup_take(r->wake, &woken) != GW_OK) {
        relay_wakeup_close(r->wake);
        r->wake = NULL;
        woken = true;
    }
    r->woken |= woken;
}

/*
 * wait_event - the next broker event within @timeout_ms, or a NOTIFY, which
 * starts the idle lane at once: rows committed while a batch waits for its
 * confirms go out beside it. GW_ERR_RETRY when nothing came from the broker.
 */
static gw_err wait_event(relay *r, int timeout_ms, volatile sig_atomic_t *stop, bool *more)
{
    struct pollfd fds[2];
    gw_err err;

    /* frames rabbitmq-c has already read sit where poll() cannot see them */
    if (r->wake == NULL || mq_has_queued(r->mq))
        return pump_event(r, timeout_ms);
    fds[0] = (struct pollfd){mq_fd(r->mq), POLLIN, 0};
    fds[1] = (struct pollfd){relay_wakeup_fd(r->wake), POLLIN, 0};
    if (poll(fds, 2, timeout_ms) <= 0)
        return GW_ERR_RETRY; /* a timeout, or EINTR: the caller looks at the clock and the stop */
    if (fds[1].revents)
        take_wakeup(r);
    if (r->woken && (err = start_lanes(r, stop, more)) != GW_OK)
        return err;
    return fds[0].revents ? pump_event(r, 1) : GW_ERR_RETRY;
}

/*
 * relay_cycle - keep both lanes going: start a batch in every idle lane while
 * the claims come back full (unless stopping or blocked), then read confirms
 * until the oldest lane's batch is settled or given up, and finish it (marks,
 * COMMIT). While one lane waits for its confirms, the other's rows are already
 * published. *@more says a full batch was claimed (more may be waiting).
 */
static gw_err relay_cycle(relay *r, volatile sig_atomic_t *stop, bool *more)
{
    relay_lane *old;
    gw_err err;

    *more = false;
    if ((err = start_lanes(r, stop, more)) != GW_OK)
        return err;
    old = r->lanes[r->oldest];
    if (!relay_lane_busy(old)) {
        if (mq_blocked(r->mq))
            return pump_event(r, 200) == GW_ERR_MQ ? GW_ERR_MQ : GW_OK; /* wait for unblock */
        return GW_OK;
    }
    while (relay_lane_waiting(old) > 0) {
        long left = confirm_wait_ms(r, old, stop);

        if (left <= 0) {
            /* late confirms would confuse the next batch: reconnect */
            finish_all(r, true);
            return GW_ERR_MQ;
        }
        err = wait_event(r, (int)left, stop, more);
        if (err != GW_OK && err != GW_ERR_RETRY)
            return err; /* drop_mq() keeps what was acked so far */
    }
    err = relay_lane_finish(old, false);
    r->oldest = (r->oldest + 1) % LANES;
    if (err == GW_OK && relay_lane_nacked(old)) {
        /* the rows stay pending. A fresh channel next: after a quorum queue's leader moved,
         * RabbitMQ 3.10 kept nacking every publish on the old channel (docs/decisions.md, 20) */
        log_warn("relay_reconnect_after_nack", "node=%d", mq_node(r->mq));
        return GW_ERR_MQ;
    }
    if (err == GW_OK && relay_lane_busy(r->lanes[r->oldest]))
        *more = true; /* the other lane is in flight: keep cycling */
    return err;
}

/*
 * housekeeping - the chores that are due (chores.h), on the LISTEN session: a
 * relay that always has a lane in flight (at its limit) must still report its
 * backlog and purge. Without that session, on the first lane's, between batches.
 */
static void housekeeping(relay *r)
{
    db_conn *db = r->wake ? relay_wakeup_db(r->wake) : any_busy(r) ? NULL : r->db;

    if (db == NULL)
        return;
    /* busy: rows flowing in the last second, not only a lane in flight now (at a moderate
     * rate most batches are done in milliseconds, and the next arrives soon after) */
    relay_chores_db(r->chores, db, any_busy(r) || now_ms() - r->claimed_ms < 1000);
    if (r->wake != NULL && db == relay_wakeup_db(r->wake))
        take_wakeup(r); /* what the statements read along */
}

/* queue_counts - the broker's counts when due, between batches. GW_ERR_MQ: reconnect. */
static gw_err queue_counts(relay *r)
{
    gw_err err;

    if ((err = relay_chores_queues(r->chores, r->mq)) != GW_OK)
        return err;
    /* a connection.blocked that came during the RPCs is queued where poll() cannot see it */
    while (mq_has_queued(r->mq))
        if ((err = pump_event(r, 1)) == GW_ERR_MQ)
            return err;
    return GW_OK;
}

/* Wait for a NOTIFY, a broker frame, or the polling fallback, whichever comes first. */
static gw_err wait_for_work(relay *r)
{
    struct pollfd fds[2] = {{r->wake ? relay_wakeup_fd(r->wake) : -1, POLLIN, 0},
                            {mq_fd(r->mq), POLLIN, 0}};
    gw_err err;

    if (poll(fds, 2, RELAY_POLL_MS) < 0)
        return GW_OK; /* EINTR: the loop checks the stop flag */
    if (fds[1].revents) {
        /* heartbeats, connection.blocked, or a close */
        err = pump_event(r, 1);
        if (err == GW_ERR_MQ)
            return err;
    }
    if (fds[0].revents)
        take_wakeup(r);
    return GW_OK;
}

void relay_run(relay *r, volatile sig_atomic_t *stop)
{
    backoff bo, db_bo;
    bool more;
    gw_err err;

    backoff_init(&bo, 200, 10000);
    backoff_init(&db_bo, 200, DB_RECONNECT_MAX_MS);
    /* on stop: no new batch, but the ones in hand are confirmed, marked and committed */
    while (!*stop || (r->lanes[0] != NULL && any_busy(r))) {
        if ((err = connect_db(r)) != GW_OK) {
            drop_db(r);
            backoff_wait(&db_bo, stop);
            continue;
        }
        backoff_reset(&db_bo);
        if ((err = connect_mq(r)) != GW_OK) {
            if (*stop)
                break;
            backoff_wait(&bo, stop);
            continue;
        }
        err = relay_cycle(r, stop, &more);
        if (err == GW_ERR_MQ) {
            drop_mq(r);
            backoff_wait(&bo, stop);
            continue;
        }
        if (err != GW_OK) {
            finish_all(r, false);
            if (PQstatus(db_pg(r->db)) != CONNECTION_OK)
                drop_db(r);
            backoff_wait(&db_bo, stop);
            continue;
        }
        backoff_reset(&bo);
        housekeeping(r);
        if (more || any_busy(r) || r->woken)
            continue;
        if (queue_counts(r) == GW_ERR_MQ) {
            drop_mq(r);
            continue;
        }
        if (mq_blocked(r->mq))
            continue; /* relay_cycle() waits for the unblock */
        err = wait_for_work(r);
        if (err == GW_ERR_MQ)
            drop_mq(r);
        else if (err == GW_ERR_DB)
            drop_db(r);
    }
    finish_all(r, false);
}
