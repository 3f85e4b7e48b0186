/* worker/settle/consumer.h - the worker's broker side: connections, qos and consume, deliveries in
 * (event "delivered") and their answers out (event "acked"); the retry copies' connection too */
#ifndef WORKER_SETTLE_CONSUMER_H
#define WORKER_SETTLE_CONSUMER_H

#include <stdbool.h>
#include <time.h>

#include <amqp.h>

#include "shared/amqp/mq.h"
#include "shared/config.h"
#include "shared/http/health.h"
#include "shared/lib/err.h"
#include "shared/lib/metrics.h"
#include "shared/payment.h"
#include "worker/settle/verdict.h"

/*
 * One delivery of a batch. consumer_receive() fills env and clears the rest;
 * worker/settle/settle.c parses it into p, attempt and message_id and sets v;
 * consumer_answer() sends v; consumer_release() frees env.
 */
typedef struct delivery {
    amqp_envelope_t env; /* owned until consumer_release() */
    payment p;
    int attempt;
    verdict v;
    bool decided; /* v is final; otherwise it waits for the batch COMMIT */
    char message_id[128];
    char bank_reference[129]; /* BANK_REFERENCE_MAX (bank.h): the HTTP bank's, or "" */
    bool outcome_unknown;     /* an earlier attempt's bank outcome is still unknown */
    struct timespec received; /* CLOCK_MONOTONIC, when its batch was received */
} delivery;

typedef struct consumer consumer;

/*
 * consumer_new - the broker side for @cfg (borrowed), registering its series
 * in @registry (before the metrics server starts). Not connected yet. Owned by
 * the caller (consumer_free()).
 */
GW_MUSTCHECK gw_err consumer_new(const gw_config *cfg, metrics *registry, consumer **out);
void consumer_free(consumer *c); /* accepts NULL; closes both connections */

/* consumer_set_health - where to report the broker's readiness (borrowed, may be NULL). */
void consumer_set_health(consumer *c, health *h);

/*
 * consumer_connect - unless both are up: the consumer connection (topology,
 * basic.qos WORKER_PREFETCH, basic.consume with manual ack) and the
 * confirm-mode connection for retry copies. When only the latter is down, only it
 * is opened again. On failure both are closed.
 */
GW_MUSTCHECK gw_err consumer_connect(consumer *c);

/* consumer_drop - close both connections: the broker requeues whatever was not answered. */
void consumer_drop(consumer *c);

/* consumer_retry_publisher - the confirm-mode connection for retry copies (borrowed). */
mq_conn *consumer_retry_publisher(consumer *c);

/*
 * consumer_keepalive - call it every turn of the loop: once a second it answers the
 * broker's heartbeats on the retry publisher, which nothing else reads while no payment
 * is retried (else the broker closes it after three heartbeat intervals, and the next
 * retry copy would fail on it). A connection found closed is dropped; consumer_connect()
 * opens it again without touching the deliveries in hand.
 */
void consumer_keepalive(consumer *c);

/*
 * consumer_receive - wait up to 1 s for a first delivery (the bounded wait is
 * how a signal is noticed; without @wait, not at all: only what has arrived
 * already), then take whatever else is already buffered, up to
 * @max, into @batch. The count in *@n; each one is counted as delivered. When
 * *@n > 0, answer them with consumer_answer() (or drop the connection), then
 * consumer_release() them. GW_ERR_MQ: reconnect.
 */
GW_MUSTCHECK gw_err consumer_receive(consumer *c, delivery *batch, int max, bool wait, int *n);

/*
 * consumer_answer - every delivery's verdict as an answer: the nacks one by
 * one, then a single ack with "multiple" up to the highest acked tag. Call
 * only after the batch COMMIT. GW_ERR_MQ when the broker could not be told.
 */
GW_MUSTCHECK gw_err consumer_answer(consumer *c, const delivery *batch, int n);

/* consumer_release - the batch is done (answered or not): time it, free its envelopes. */
void consumer_release(consumer *c, delivery *batch, int n);

/* consumer_cancel - stop taking new work (basic.cancel), when connected; close comes after. */
void consumer_cancel(consumer *c);

#endif
