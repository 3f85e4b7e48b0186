/* worker/settle/settle.c - one delivery at a time; ack only after the effect is durable */
#include "worker/settle/settle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <amqp.h>

#include "shared/amqp/mq.h"
#include "shared/failpoint.h"
#include "shared/lib/backoff.h"
#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"
#include "shared/mq_topology.h"
#include "shared/payment.h"
#include "shared/pg/db.h"
#include "worker/settle/inbox.h"
#include "worker/settle/retry.h"

#define CONSUMER_TAG "payments-worker"

/* What to do with a delivery once it was looked at; translated to AMQP in one place. */
typedef enum verdict {
    VERDICT_ACK,     /* settled now, or a duplicate: done */
    VERDICT_RETRY,   /* a confirmed copy went to the delay queue: ack the original */
    VERDICT_DEAD,    /* nack without requeue: the DLX writes x-death */
    VERDICT_REQUEUE, /* our side failed (database): give it back, try later */
} verdict;

struct settler {
    const gw_config *cfg;
    const bank *bank;
    health *health;
    db_conn *db;
    mq_conn *consumer;  /* deliveries only */
    mq_conn *publisher; /* retry copies, in confirm mode: its confirms never mix with deliveries */
    metric *delivered, *redelivered, *settled, *duplicates, *dead_invalid, *dead_permanent,
        *dead_exhausted, *requeued, *acked;
    metric *retried[CONFIG_MAX_RETRY_STEPS];
    metric *processing_seconds, *accept_to_settle_seconds;
};

gw_err settler_new(const gw_config *cfg, const bank *b, metrics *m, settler **out)
{
    settler *s = calloc(1, sizeof *s);
    char labels[48];

    if (s == NULL)
        return GW_ERR_NOMEM;
    s->cfg = cfg;
    s->bank = b;
    s->delivered = metrics_counter(m, "paygw_worker_delivered_total", NULL,
                                   "Deliveries received from payments.settlement.");
    s->redelivered = metrics_counter(m, "paygw_worker_redelivered_total", NULL,
                                     "Deliveries the broker flagged as redelivered.");
    s->settled = metrics_counter(m, "paygw_worker_settled_total", NULL,
                                 "Ledger effects committed (then acked).");
    s->duplicates =
        metrics_counter(m, "paygw_worker_duplicates_skipped_total", NULL,
                        "Deliveries whose effect was already committed: acked, no effect.");
    for (int i = 0; i < cfg->retry_steps; i++) {
        snprintf(labels, sizeof labels, "delay_ms=\"%d\"", cfg->retry_delays_ms[i]);
        s->retried[i] = metrics_counter(m, "paygw_worker_retried_total", labels,
                                        "Transient failures sent to a delay queue, by step.");
    }
    s->dead_invalid = metrics_counter(m, "paygw_worker_dead_lettered_total", "reason=\"invalid\"",
                                      "Deliveries sent to the DLQ, by reason.");
    s->dead_permanent =
        metrics_counter(m, "paygw_worker_dead_lettered_total", "reason=\"permanent\"", "");
    s->dead_exhausted =
        metrics_counter(m, "paygw_worker_dead_lettered_total", "reason=\"exhausted\"", "");
    s->acked =
        metrics_counter(m, "paygw_worker_acked_total", NULL,
                        "Deliveries acked (after their COMMIT), so the broker forgets them.");
    s->requeued = metrics_counter(m, "paygw_worker_requeued_total", NULL,
                                  "Deliveries given back because the database failed.");
    s->processing_seconds = metrics_histogram(m, "paygw_worker_processing_duration_seconds", NULL,
                                              "From delivery to ack or nack.",
                                              metrics_latency_bounds, metrics_latency_nbounds);
    s->accept_to_settle_seconds =
        metrics_histogram(m, "paygw_accept_to_settle_seconds", NULL,
                          "From the accept's COMMIT to the settle's COMMIT.",
                          metrics_latency_bounds, metrics_latency_nbounds);
    *out = s;
    return GW_OK;
}

void settler_set_health(settler *s, health *h)
{
    s->health = h;
}

static void drop_mq(settler *s)
{
    mq_close(s->consumer);
    mq_close(s->publisher);
    s->consumer = s->publisher = NULL;
    health_set_mq(s->health, false);
}

static void drop_db(settler *s)
{
    db_close(s->db);
    s->db = NULL;
    health_set_db(s->health, false);
}

void settler_free(settler *s)
{
    if (s == NULL)
        return;
    drop_mq(s);
    drop_db(s);
    free(s);
}

static gw_err connect_db(settler *s)
{
    gw_err err;

    if (s->db == NULL && (err = db_open(s->cfg->database_url, "payments-worker", inbox_stmts,
                                        inbox_nstmts, false, &s->db)) != GW_OK)
        return err;
    if ((err = db_ensure(s->db)) != GW_OK)
        return err;
    health_set_db(s->health, true);
    return GW_OK;
}

/* Both connections, the topology, QoS and the consumer, after every reconnect. */
static gw_err connect_mq(settler *s)
{
    amqp_connection_state_t c;
    gw_err err;

    if (s->consumer != NULL && mq_fd(s->consumer) >= 0 && s->publisher != NULL &&
        mq_fd(s->publisher) >= 0)
        return GW_OK;
    drop_mq(s);
    if ((err = mq_open(s->cfg->amqp_url, s->cfg->amqp_cacert, "payments-worker", false,
                       &s->consumer)) != GW_OK ||
        (err = mq_open(s->cfg->amqp_url, s->cfg->amqp_cacert, "payments-worker-retry", true,
                       &s->publisher)) != GW_OK ||
        (err = mq_topology_declare(s->consumer, s->cfg)) != GW_OK)
        goto fail;
    c = mq_state(s->consumer);
    amqp_basic_qos(c, MQ_CHANNEL, 0, (uint16_t)s->cfg->worker_prefetch, 0);
    if ((err = mq_check(amqp_get_rpc_reply(c), "basic.qos")) != GW_OK)
        goto fail;
    amqp_basic_consume(c, MQ_CHANNEL, mq_bytes(MQ_QUEUE_SETTLEMENT), mq_bytes(CONSUMER_TAG), 0,
                       0 /* manual ack */, 0, amqp_empty_table);
    if ((err = mq_check(amqp_get_rpc_reply(c), "basic.consume")) != GW_OK)
        goto fail;
    health_set_mq(s->health, true);
    log_info("consuming", "queue=%s prefetch=%d", MQ_QUEUE_SETTLEMENT, s->cfg->worker_prefetch);
    return GW_OK;
fail:
    drop_mq(s);
    return err;
}

/* A transient failure: a delayed copy while attempts remain, the DLQ after. */
static verdict on_transient(settler *s, const amqp_envelope_t *env, const payment *p, int attempt,
                            const char *why)
{
    int max_attempts = s->cfg->retry_steps + 1;

    if (attempt >= max_attempts) {
        char last[256];

        snprintf(last, sizeof last, "retries exhausted after %d attempts: %s", attempt, why);
        if (inbox_mark_dead(s->db, p->payment_id, p->event_id, attempt, last) != GW_OK)
            return VERDICT_REQUEUE;
        metrics_add(s->dead_exhausted, 1);
        log_warn("payment_dead_lettered", "event_id=%s payment_id=%s attempt=%d reason=exhausted",
                 p->event_id, p->payment_id, attempt);
        return VERDICT_DEAD;
    }
    /* the status first: it is only a view, and the copy below is what carries the retry */
    if (inbox_mark_retrying(s->db, p, attempt, why) != GW_OK)
        return VERDICT_REQUEUE;
    if (retry_publish(s->publisher, s->cfg, env, attempt, why) != GW_OK)
        return VERDICT_REQUEUE; /* not acked: the broker redelivers it */
    if (failpoint_hit("worker.after_retry_publish") != GW_OK)
        return VERDICT_REQUEUE;
    metrics_add(s->retried[attempt - 1], 1);
    log_info("payment_retrying", "event_id=%s payment_id=%s attempt=%d delay_ms=%d error=\"%s\"",
             p->event_id, p->payment_id, attempt, s->cfg->retry_delays_ms[attempt - 1], why);
    return VERDICT_RETRY;
}

/* One delivery of a batch, from receipt to its answer. */
typedef struct delivery {
    amqp_envelope_t env;
    payment p;
    int attempt;
    verdict v;
    bool decided; /* v is final; otherwise it waits for the batch COMMIT */
    char message_id[128];
} delivery;

static void decide(delivery *d, verdict v)
{
    d->v = v;
    d->decided = true;
}

/*
 * triage - everything before the batch transaction: validation (the API's
 * rules: a message the API would refuse is poison), the bank call, and what a
 * failure means. Leaves undecided only the deliveries to settle now.
 */
static void triage(settler *s, delivery *d, bool seen)
{
    char why[200];
    bank_result br;

    if (seen) {
        metrics_add(s->duplicates, 1);
        log_info("duplicate_skipped", "event_id=%s payment_id=%s attempt=%d redelivered=%d",
                 d->p.event_id, d->p.payment_id, d->attempt, d->env.redelivered);
        decide(d, VERDICT_ACK);
        return;
    }
    br = bank_settle(s->bank, &d->p, d->attempt, why, sizeof why);
    if (br == BANK_TRANSIENT) {
        decide(d, on_transient(s, &d->env, &d->p, d->attempt, why));
    } else if (br == BANK_PERMANENT) {
        if (inbox_mark_dead(s->db, d->p.payment_id, d->p.event_id, d->attempt, why) != GW_OK) {
            decide(d, VERDICT_REQUEUE);
            return;
        }
        metrics_add(s->dead_permanent, 1);
        log_warn("payment_dead_lettered",
                 "event_id=%s payment_id=%s attempt=%d reason=permanent error=\"%s\"",
                 d->p.event_id, d->p.payment_id, d->attempt, why);
        decide(d, VERDICT_DEAD);
    }
}

/* Parse and validate; false (decided DEAD) for poison. */
static bool validate(settler *s, delivery *d)
{
    const amqp_basic_properties_t *props = &d->env.message.properties;
    char reason[200];
    json_t *root = NULL;
    field_errors errs;
    bool ok;

    d->attempt = retry_attempt(props);
    if (props->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        retry_bytes_str(props->message_id, d->message_id, sizeof d->message_id);
    ok = json_strict_parse(d->env.message.body.bytes, d->env.message.body.len,
                           JSON_STRICT_MAX_DEPTH, &root, reason, sizeof reason) == GW_OK &&
         payment_validate(root, &d->p, &errs) == GW_OK &&
         strcmp(d->message_id, d->p.event_id) ==
             0; /* docs/architecture.md, "The flow": message_id = event_id */
    json_decref(root);
    if (!ok) {
        metrics_add(s->dead_invalid, 1);
        log_warn("delivery_invalid", "message_id=\"%s\" delivery_tag=%llu bytes=%zu", d->message_id,
                 (unsigned long long)d->env.delivery_tag, d->env.message.body.len);
        decide(d, VERDICT_DEAD);
    }
    return ok;
}

/*
 * settle_pending - one transaction for every undecided delivery (each in its
 * own subtransaction), then their verdicts. Nothing is acked before this
 * COMMIT; when it fails, they all go back to the queue.
 */
static void settle_pending(settler *s, delivery *batch, int n)
{
    inbox_item items[SETTLE_BATCH_MAX];
    int idx[SETTLE_BATCH_MAX], m = 0;

    for (int i = 0; i < n; i++) {
        if (batch[i].decided)
            continue;
        items[m].p = &batch[i].p;
        items[m].attempt = batch[i].attempt;
        idx[m++] = i;
    }
    if (m == 0)
        return;
    if (inbox_settle_batch(s->db, items, m) != GW_OK) {
        for (int k = 0; k < m; k++)
            decide(&batch[idx[k]], VERDICT_REQUEUE); /* rolled back: nothing happened */
        return;
    }
    for (int k = 0; k < m; k++) {
        delivery *d = &batch[idx[k]];

        if (items[k].failed) {
            decide(d, VERDICT_REQUEUE);
            continue;
        }
        switch (items[k].outcome) {
        case INBOX_SETTLED:
            metrics_add(s->settled, 1);
            metrics_observe(s->accept_to_settle_seconds, items[k].accept_to_settle_s);
            log_info("payment_settled", "event_id=%s payment_id=%s attempt=%d amount_cents=%lld",
                     d->p.event_id, d->p.payment_id, d->attempt, (long long)d->p.amount_cents);
            decide(d, VERDICT_ACK);
            break;
        case INBOX_DUPLICATE:
            metrics_add(s->duplicates, 1);
            decide(d, VERDICT_ACK);
            break;
        case INBOX_TERMINAL:
            log_warn("settle_after_dead_letter", "event_id=%s payment_id=%s", d->p.event_id,
                     d->p.payment_id);
            decide(d, VERDICT_ACK);
            break;
        case INBOX_UNKNOWN:
            metrics_add(s->dead_invalid, 1);
            log_warn("payment_unknown", "event_id=%s payment_id=%s", d->p.event_id,
                     d->p.payment_id);
            decide(d, VERDICT_DEAD);
            break;
        }
    }
}

/* Decide every delivery of the batch; the database work is two round trips for all of them. */
static void process_batch(settler *s, delivery *batch, int n)
{
    inbox_item items[SETTLE_BATCH_MAX];
    bool seen[SETTLE_BATCH_MAX];
    int idx[SETTLE_BATCH_MAX], m = 0;

    for (int i = 0; i < n; i++) {
        if (!validate(s, &batch[i]))
            continue;
        items[m].p = &batch[i].p;
        items[m].attempt = batch[i].attempt;
        idx[m++] = i;
    }
    /* a cheap pre-check, so the bank is not called again for an effect already committed */
    if (m > 0 && inbox_seen_many(s->db, items, m, seen) != GW_OK) {
        for (int k = 0; k < m; k++)
            decide(&batch[idx[k]], VERDICT_REQUEUE);
        return;
    }
    for (int k = 0; k < m; k++)
        triage(s, &batch[idx[k]], seen[k]);
    settle_pending(s, batch, n);
}

/* The one place a verdict becomes an AMQP answer. */
static int answer_one(settler *s, uint64_t tag, verdict v, bool multiple)
{
    amqp_connection_state_t c = mq_state(s->consumer);

    switch (v) {
    case VERDICT_ACK:
    case VERDICT_RETRY:
        return amqp_basic_ack(c, MQ_CHANNEL, tag, multiple);
    case VERDICT_DEAD:
        return amqp_basic_nack(c, MQ_CHANNEL, tag, 0, 0 /* no requeue: to the DLX */);
    case VERDICT_REQUEUE:
    default:
        metrics_add(s->requeued, 1);
        return amqp_basic_nack(c, MQ_CHANNEL, tag, 0, 1);
    }
}

/*
 * answer_batch - nacks one by one first, then a single ack with "multiple" up
 * to the highest acked tag: every earlier delivery is answered by then, so the
 * multiple ack covers exactly this batch's acks.
 */
static gw_err answer_batch(settler *s, delivery *batch, int n)
{
    uint64_t last_ack = 0, acks = 0;
    int rc = AMQP_STATUS_OK;

    for (int i = 0; i < n && rc == AMQP_STATUS_OK; i++) {
        if (batch[i].v == VERDICT_ACK || batch[i].v == VERDICT_RETRY) {
            last_ack = batch[i].env.delivery_tag;
            acks++;
        } else {
            rc = answer_one(s, batch[i].env.delivery_tag, batch[i].v, false);
        }
    }
    if (rc == AMQP_STATUS_OK && last_ack != 0) {
        rc = answer_one(s, last_ack, VERDICT_ACK, true);
        if (rc == AMQP_STATUS_OK) {
            metrics_add(s->acked, acks);
            log_debug("deliveries_acked", "count=%llu up_to_tag=%llu", (unsigned long long)acks,
                      (unsigned long long)last_ack);
        }
    }
    return rc == AMQP_STATUS_OK ? GW_OK : GW_ERR_MQ;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A frame that is not a delivery: a cancel, a close, or something to ignore. */
static gw_err on_other_frame(settler *s)
{
    amqp_frame_t f;

    if (amqp_simple_wait_frame(mq_state(s->consumer), &f) != AMQP_STATUS_OK)
        return GW_ERR_MQ;
    if (f.frame_type != AMQP_FRAME_METHOD)
        return GW_OK;
    switch (f.payload.method.id) {
    case AMQP_BASIC_CANCEL_METHOD: /* queue deleted or failed over: consume again */
        log_warn("consumer_cancelled", "queue=%s", MQ_QUEUE_SETTLEMENT);
        return GW_ERR_MQ;
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD:
        log_warn("mq_closed_by_broker", "method=0x%08x", (unsigned)f.payload.method.id);
        return GW_ERR_MQ;
    default:
        return GW_OK;
    }
}

/*
 * receive - wait up to 1 s for a first delivery (the bounded wait is how a
 * signal is noticed: rabbitmq-c retries poll on EINTR), then take whatever
 * else is already buffered, up to @max. Returns the count in *@n.
 */
static gw_err receive(settler *s, delivery *batch, int max, int *n)
{
    amqp_connection_state_t c = mq_state(s->consumer);

    *n = 0;
    amqp_maybe_release_buffers(c);
    while (*n < max) {
        struct timeval first = {1, 0}, more = {0, 0};
        amqp_rpc_reply_t r;

        if (*n > 0 && !amqp_frames_enqueued(c) && !amqp_data_in_buffer(c))
            more.tv_usec = 1000; /* a short look for what the broker is still sending */
        r = amqp_consume_message(c, &batch[*n].env, *n == 0 ? &first : &more, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
            memset(&batch[*n].p, 0, sizeof batch[*n].p);
            batch[*n].decided = false;
            batch[*n].message_id[0] = '\0';
            (*n)++;
            continue;
        }
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_TIMEOUT)
            return GW_OK;
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            gw_err err = on_other_frame(s);
            if (err != GW_OK || *n > 0)
                return err;
            continue;
        }
        return mq_check(r, "basic.consume") == GW_OK ? GW_OK : GW_ERR_MQ;
    }
    return GW_OK;
}

/* Receive a batch, decide it, commit it, answer it. */
static gw_err consume_batch(settler *s, delivery *batch, backoff *db_backoff,
                            volatile sig_atomic_t *stop)
{
    /* half the prefetch: the other half streams in while this half commits, so the broker
     * never waits for our acks with nothing left to send */
    int half = s->cfg->worker_prefetch > 1 ? s->cfg->worker_prefetch / 2 : 1;
    int max = half < SETTLE_BATCH_MAX ? half : SETTLE_BATCH_MAX;
    struct timespec t0;
    bool requeued = false;
    gw_err err;
    int n = 0;

    err = receive(s, batch, max, &n);
    if (n == 0)
        return err;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        metrics_add(s->delivered, 1);
        if (batch[i].env.redelivered)
            metrics_add(s->redelivered, 1);
    }
    process_batch(s, batch, n);
    for (int i = 0; i < n; i++)
        requeued = requeued || batch[i].v == VERDICT_REQUEUE;
    if (requeued && !*stop) {
        /* our side failed: wait before giving the messages back, so they do not spin */
        if (PQstatus(db_pg(s->db)) != CONNECTION_OK)
            health_set_db(s->health, false);
        backoff_wait(db_backoff, stop);
    } else if (!requeued) {
        backoff_reset(db_backoff);
    }
    if (failpoint_hit("worker.after_commit") != GW_OK)
        err = GW_ERR_MQ; /* "error": drop the connection without acking */
    else
        err = answer_batch(s, batch, n);
    metrics_observe(s->processing_seconds, seconds_since(&t0));
    for (int i = 0; i < n; i++)
        amqp_destroy_envelope(&batch[i].env);
    return err;
}

/* Once a minute: forget inbox rows past the retention, in small batches. */
static void housekeeping(settler *s, time_t *next)
{
    time_t now = time(NULL);
    long deleted = 0;

    if (now < *next)
        return;
    *next = now + 60;
    if (inbox_purge(s->db, s->cfg->inbox_retention_days, 1000, &deleted) == GW_OK && deleted > 0) {
        log_info("inbox_purged", "rows=%ld retention_days=%d", deleted,
                 s->cfg->inbox_retention_days);
        *next = now; /* more may be left */
    }
}

void settler_run(settler *s, volatile sig_atomic_t *stop)
{
    delivery *batch = calloc(SETTLE_BATCH_MAX, sizeof *batch);
    backoff bo, db_bo;
    time_t next_housekeeping = 0;

    if (batch == NULL)
        abort(); /* start-up allocation */

    backoff_init(&bo, 200, 10000);
    backoff_init(&db_bo, 200, 5000);
    while (!*stop) {
        if (connect_db(s) != GW_OK) {
            drop_db(s);
            backoff_wait(&bo, stop);
            continue;
        }
        if (connect_mq(s) != GW_OK) {
            backoff_wait(&bo, stop);
            continue;
        }
        backoff_reset(&bo);
        housekeeping(s, &next_housekeeping);
        if (consume_batch(s, batch, &db_bo, stop) != GW_OK)
            drop_mq(s); /* unacked deliveries return to the queue; the inbox dedupes */
    }
    if (s->consumer != NULL) {
        /* stop taking new work; what was prefetched but not processed is requeued on close */
        amqp_connection_state_t st = mq_state(s->consumer);

        if (amqp_basic_cancel(st, MQ_CHANNEL, mq_bytes(CONSUMER_TAG)) == NULL &&
            mq_check(amqp_get_rpc_reply(st), "basic.cancel") != GW_OK)
            /* the connection's close, next, returns the deliveries all the same */
            log_warn("settle_cancel_failed", "then=close");
    }
    free(batch);
}
