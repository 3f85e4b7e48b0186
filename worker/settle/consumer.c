/* worker/settle/consumer.c - deliveries in, answers out; ack only what settle.c has committed */
#include "worker/settle/consumer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shared/lib/log.h"
#include "shared/mq_topology.h"

#define CONSUMER_TAG "payments-worker"

struct consumer {
    const gw_config *cfg;
    health *health;
    mq_conn *consumer;  /* deliveries only */
    mq_conn *publisher; /* retry copies, in confirm mode: its confirms never mix with deliveries */
    time_t kept_alive_at; /* CLOCK_MONOTONIC second of the last consumer_keepalive() */
    metric *delivered, *redelivered, *acked, *requeued, *processing_seconds;
};

gw_err consumer_new(const gw_config *cfg, metrics *m, consumer **out)
{
    consumer *c = calloc(1, sizeof *c);

    if (c == NULL)
        return GW_ERR_NOMEM;
    c->cfg = cfg;
    mq_metrics_attach(m);
    c->delivered = metrics_counter(m, "paygw_worker_delivered_total", NULL,
                                   "Deliveries received from payments.settlement.");
    c->redelivered = metrics_counter(m, "paygw_worker_redelivered_total", NULL,
                                     "Deliveries the broker flagged as redelivered.");
    c->acked =
        metrics_counter(m, "paygw_worker_acked_total", NULL,
                        "Deliveries acked (after their COMMIT), so the broker forgets them.");
    c->requeued = metrics_counter(m, "paygw_worker_requeued_total", NULL,
                                  "Deliveries given back because the database failed.");
    c->processing_seconds = metrics_histogram(m, "paygw_worker_processing_duration_seconds", NULL,
                                              "From delivery to ack or nack.",
                                              metrics_latency_bounds, metrics_latency_nbounds);
    *out = c;
    return GW_OK;
}

void consumer_set_health(consumer *c, health *h)
{
    c->health = h;
}

void consumer_drop(consumer *c)
{
    mq_close(c->consumer);
    mq_close(c->publisher);
    c->consumer = c->publisher = NULL;
    health_set_mq(c->health, false);
}

void consumer_free(consumer *c)
{
    if (c != NULL)
        consumer_drop(c);
    free(c);
}

mq_conn *consumer_retry_publisher(consumer *c)
{
    return c->publisher;
}

/* Both connections, the topology, QoS and the consumer, after every reconnect. */
gw_err consumer_connect(consumer *c)
{
    amqp_connection_state_t st;
    gw_err err;

    if (c->consumer != NULL && mq_fd(c->consumer) >= 0) {
        if (c->publisher != NULL && mq_fd(c->publisher) >= 0)
            return GW_OK;
        /* only the retry publisher is gone: the deliveries in hand stay ours */
        mq_close(c->publisher);
        c->publisher = NULL;
        if (mq_open(c->cfg->amqp_url, c->cfg->amqp_cacert, "payments-worker-retry", true,
                    &c->publisher) == GW_OK)
            return GW_OK;
    }
    consumer_drop(c);
    if ((err = mq_open(c->cfg->amqp_url, c->cfg->amqp_cacert, "payments-worker", false,
                       &c->consumer)) != GW_OK ||
        (err = mq_open(c->cfg->amqp_url, c->cfg->amqp_cacert, "payments-worker-retry", true,
                       &c->publisher)) != GW_OK ||
        (err = mq_topology_declare(c->consumer, c->cfg)) != GW_OK)
        goto fail;
    st = mq_state(c->consumer);
    amqp_basic_qos(st, MQ_CHANNEL, 0, (uint16_t)c->cfg->worker_prefetch, 0);
    if ((err = mq_check(amqp_get_rpc_reply(st), "basic.qos")) != GW_OK)
        goto fail;
    amqp_basic_consume(st, MQ_CHANNEL, mq_bytes(MQ_QUEUE_SETTLEMENT), mq_bytes(CONSUMER_TAG), 0,
                       0 /* manual ack */, 0, amqp_empty_table);
    if ((err = mq_check(amqp_get_rpc_reply(st), "basic.consume")) != GW_OK)
        goto fail;
    health_set_mq(c->health, true);
    log_info("consuming", "queue=%s prefetch=%d", MQ_QUEUE_SETTLEMENT, c->cfg->worker_prefetch);
    return GW_OK;
fail:
    consumer_drop(c);
    return err;
}

void consumer_keepalive(consumer *c)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    if (c->publisher == NULL || now.tv_sec == c->kept_alive_at)
        return;
    c->kept_alive_at = now.tv_sec;
    if (mq_keepalive(c->publisher) != GW_OK) {
        log_warn("mq_retry_publisher_lost", "action=reopen");
        mq_close(c->publisher);
        c->publisher = NULL; /* consumer_connect() opens it again */
    }
}

/* A frame that is not a delivery: a cancel, a close, or something to ignore. */
static gw_err on_other_frame(consumer *c)
{
    amqp_frame_t f;

    if (amqp_simple_wait_frame(mq_state(c->consumer), &f) != AMQP_STATUS_OK)
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

/* The wait of consumer_receive(), without its accounting. */
static gw_err receive(consumer *c, delivery *batch, int max, bool wait, int *n)
{
    amqp_connection_state_t st = mq_state(c->consumer);

    *n = 0;
    amqp_maybe_release_buffers(st);
    while (*n < max) {
        struct timeval first = {wait ? 1 : 0, 0}, more = {0, 0};
        amqp_rpc_reply_t r;

        if (*n > 0 && !amqp_frames_enqueued(st) && !amqp_data_in_buffer(st))
            more.tv_usec = 1000; /* a short look for what the broker is still sending */
        r = amqp_consume_message(st, &batch[*n].env, *n == 0 ? &first : &more, 0);
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
            gw_err err = on_other_frame(c);
            if (err != GW_OK || *n > 0)
                return err;
            continue;
        }
        return mq_check(r, "basic.consume") == GW_OK ? GW_OK : GW_ERR_MQ;
    }
    return GW_OK;
}

gw_err consumer_receive(consumer *c, delivery *batch, int max, bool wait, int *n)
{
    gw_err err = receive(c, batch, max, wait, n);
    struct timespec now;

    if (*n == 0)
        return err;
    /* event "delivered" (docs/architecture.md, "Five events") */
    clock_gettime(CLOCK_MONOTONIC, &now);
    for (int i = 0; i < *n; i++) {
        batch[i].received = now;
        metrics_add(c->delivered, 1);
        if (batch[i].env.redelivered)
            metrics_add(c->redelivered, 1);
    }
    return err;
}

/* The one place a verdict becomes an AMQP answer. */
static int answer_one(consumer *c, uint64_t tag, verdict v, bool multiple)
{
    amqp_connection_state_t st = mq_state(c->consumer);

    switch (verdict_to_answer(v)) {
    case VERDICT_ANSWER_ACK:
        return amqp_basic_ack(st, MQ_CHANNEL, tag, multiple);
    case VERDICT_ANSWER_NACK_DROP:
        return amqp_basic_nack(st, MQ_CHANNEL, tag, 0, 0 /* no requeue: to the DLX */);
    case VERDICT_ANSWER_NACK_REQUEUE:
    default:
        metrics_add(c->requeued, 1);
        return amqp_basic_nack(st, MQ_CHANNEL, tag, 0, 1);
    }
}

/*
 * Event "acked" (docs/architecture.md, "Five events"). Nacks one by one first,
 * then a single ack with "multiple" up to the highest acked tag: every earlier
 * delivery is answered by then, so the multiple ack covers exactly this
 * batch's acks.
 */
gw_err consumer_answer(consumer *c, const delivery *batch, int n)
{
    uint64_t last_ack = 0, acks = 0;
    int rc = AMQP_STATUS_OK;

    for (int i = 0; i < n && rc == AMQP_STATUS_OK; i++) {
        if (verdict_to_answer(batch[i].v) == VERDICT_ANSWER_ACK) {
            last_ack = batch[i].env.delivery_tag;
            acks++;
        } else {
            rc = answer_one(c, batch[i].env.delivery_tag, batch[i].v, false);
        }
    }
    if (rc == AMQP_STATUS_OK && last_ack != 0) {
        rc = answer_one(c, last_ack, VERDICT_ACK, true);
        if (rc == AMQP_STATUS_OK) {
            metrics_add(c->acked, acks);
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

void consumer_release(consumer *c, delivery *batch, int n)
{
    if (n > 0)
        metrics_observe(c->processing_seconds, seconds_since(&batch[0].received));
    for (int i = 0; i < n; i++)
        amqp_destroy_envelope(&batch[i].env);
}

void consumer_cancel(consumer *c)
{
    amqp_connection_state_t st;

    if (c->consumer == NULL)
        return;
    /* stop taking new work; what was prefetched but not processed is requeued on close */
    st = mq_state(c->consumer);
    if (amqp_basic_cancel(st, MQ_CHANNEL, mq_bytes(CONSUMER_TAG)) == NULL &&
        mq_check(amqp_get_rpc_reply(st), "basic.cancel") != GW_OK)
        /* the connection's close, next, returns the deliveries all the same */
        log_warn("settle_cancel_failed", "then=close");
}
