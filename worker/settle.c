/* worker/settle.c - one delivery at a time; ack only after the effect is durable */
#include "worker/settle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <amqp.h>

#include "shared/backoff.h"
#include "shared/db.h"
#include "shared/failpoint.h"
#include "shared/json_strict.h"
#include "shared/log.h"
#include "shared/mq.h"
#include "shared/mq_topology.h"
#include "shared/payment.h"
#include "worker/inbox.h"

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
        *dead_exhausted, *requeued;
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
    if ((err = mq_open(s->cfg->amqp_url, "payments-worker", false, &s->consumer)) != GW_OK ||
        (err = mq_open(s->cfg->amqp_url, "payments-worker-retry", true, &s->publisher)) != GW_OK ||
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

/* x-attempt of the delivery; 1 when absent or not an integer. Never x-death. */
static int header_attempt(const amqp_basic_properties_t *p)
{
    if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
        return 1;
    for (int i = 0; i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        int64_t v;

        if (e->key.len != 9 || memcmp(e->key.bytes, "x-attempt", 9) != 0)
            continue;
        switch (e->value.kind) {
        case AMQP_FIELD_KIND_I8:
            v = e->value.value.i8;
            break;
        case AMQP_FIELD_KIND_U8:
            v = e->value.value.u8;
            break;
        case AMQP_FIELD_KIND_I16:
            v = e->value.value.i16;
            break;
        case AMQP_FIELD_KIND_U16:
            v = e->value.value.u16;
            break;
        case AMQP_FIELD_KIND_I32:
            v = e->value.value.i32;
            break;
        case AMQP_FIELD_KIND_U32:
            v = e->value.value.u32;
            break;
        case AMQP_FIELD_KIND_I64:
            v = e->value.value.i64;
            break;
        case AMQP_FIELD_KIND_U64:
            v = (int64_t)e->value.value.u64;
            break;
        default:
            return 1;
        }
        return v >= 1 && v <= 1000 ? (int)v : 1;
    }
    return 1;
}

static void bytes_to_str(amqp_bytes_t b, char *out, size_t len)
{
    size_t n = b.len < len - 1 ? b.len : len - 1;

    memcpy(out, b.bytes, n);
    out[n] = '\0';
}

/*
 * publish_retry - a confirmed copy to payments.retry, routed by the delay of
 * this @attempt, with x-attempt + 1 and x-last-error. The original's
 * message_id, timestamp and other headers are kept; the broker's x-death is not.
 */
static gw_err publish_retry(settler *s, const amqp_envelope_t *env, int attempt, const char *why)
{
    const amqp_basic_properties_t *p = &env->message.properties;
    amqp_table_entry_t keep[24];
    amqp_table_t extra = {0, keep};
    char message_id[128] = "", traceparent[64] = "", key[16], reply[160];
    const char *trace = NULL;
    mq_message m = {0};
    gw_err err;

    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        bytes_to_str(p->message_id, message_id, sizeof message_id);
    for (int i = 0; (p->_flags & AMQP_BASIC_HEADERS_FLAG) && i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        bool ours_or_broker = e->key.len >= 2 && memcmp(e->key.bytes, "x-", 2) == 0;

        if (e->key.len == 11 && memcmp(e->key.bytes, "traceparent", 11) == 0 &&
            e->value.kind == AMQP_FIELD_KIND_UTF8) {
            bytes_to_str(e->value.value.bytes, traceparent, sizeof traceparent);
            trace = traceparent;
        } else if (!ours_or_broker && extra.num_entries < 24) {
            keep[extra.num_entries++] = *e;
        }
    }
    snprintf(key, sizeof key, "%d", s->cfg->retry_delays_ms[attempt - 1]);
    m.exchange = MQ_EXCHANGE_RETRY;
    m.routing_key = key;
    m.message_id = message_id;
    m.type = MQ_MESSAGE_TYPE;
    m.body = env->message.body.bytes;
    m.len = env->message.body.len;
    m.attempt = attempt + 1;
    m.last_error = why;
    m.traceparent = trace;
    m.extra_headers = &extra;
    m.timestamp = (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG) ? p->timestamp : 0;
    err = mq_publish_confirmed(s->publisher, &m, SETTLE_CONFIRM_TIMEOUT_MS, reply, sizeof reply);
    if (err != GW_OK)
        log_warn("retry_publish_failed", "message_id=%s attempt=%d reason=\"%s\"", message_id,
                 attempt, reply);
    return err == GW_ERR_NOT_FOUND ? GW_ERR_MQ : err;
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
    if (publish_retry(s, env, attempt, why) != GW_OK)
        return VERDICT_REQUEUE; /* not acked: the broker redelivers it */
    if (failpoint_hit("worker.after_retry_publish") != GW_OK)
        return VERDICT_REQUEUE;
    metrics_add(s->retried[attempt - 1], 1);
    log_info("payment_retrying", "event_id=%s payment_id=%s attempt=%d delay_ms=%d error=\"%s\"",
             p->event_id, p->payment_id, attempt, s->cfg->retry_delays_ms[attempt - 1], why);
    return VERDICT_RETRY;
}

/* Everything between delivery and the ack decision. */
static verdict process(settler *s, const amqp_envelope_t *env)
{
    char reason[200], why[200], message_id[128] = "";
    const amqp_basic_properties_t *props = &env->message.properties;
    int attempt = header_attempt(props);
    double accept_to_settle = 0;
    json_t *root = NULL;
    field_errors errs;
    inbox_outcome outcome;
    bank_result br;
    payment p;
    bool seen = false;
    gw_err err;

    if (props->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        bytes_to_str(props->message_id, message_id, sizeof message_id);
    /* the same validation as the API: a message that would not be accepted is poison */
    if (json_strict_parse(env->message.body.bytes, env->message.body.len, JSON_STRICT_MAX_DEPTH,
                          &root, reason, sizeof reason) != GW_OK ||
        payment_validate(root, &p, &errs) != GW_OK) {
        json_decref(root);
        metrics_add(s->dead_invalid, 1);
        log_warn("delivery_invalid", "message_id=%s delivery_tag=%llu bytes=%zu", message_id,
                 (unsigned long long)env->delivery_tag, env->message.body.len);
        return VERDICT_DEAD;
    }
    json_decref(root);
    if (strcmp(message_id, p.event_id) != 0) {
        /* CONTRACT section 4: message_id = event_id; a message without it is not one of ours */
        metrics_add(s->dead_invalid, 1);
        log_warn("delivery_invalid",
                 "message_id=\"%s\" event_id=%s delivery_tag=%llu reason=message_id_mismatch",
                 message_id, p.event_id, (unsigned long long)env->delivery_tag);
        return VERDICT_DEAD;
    }

    if ((err = inbox_seen(s->db, p.event_id, &seen)) != GW_OK)
        return VERDICT_REQUEUE;
    if (seen) {
        metrics_add(s->duplicates, 1);
        log_info("duplicate_skipped", "event_id=%s payment_id=%s attempt=%d redelivered=%d",
                 p.event_id, p.payment_id, attempt, env->redelivered);
        return VERDICT_ACK;
    }

    br = bank_settle(s->bank, &p, attempt, why, sizeof why);
    if (br == BANK_TRANSIENT)
        return on_transient(s, env, &p, attempt, why);
    if (br == BANK_PERMANENT) {
        if (inbox_mark_dead(s->db, p.payment_id, p.event_id, attempt, why) != GW_OK)
            return VERDICT_REQUEUE;
        metrics_add(s->dead_permanent, 1);
        log_warn("payment_dead_lettered",
                 "event_id=%s payment_id=%s attempt=%d reason=permanent error=\"%s\"", p.event_id,
                 p.payment_id, attempt, why);
        return VERDICT_DEAD;
    }

    if ((err = inbox_settle(s->db, &p, attempt, &outcome, &accept_to_settle)) != GW_OK)
        return VERDICT_REQUEUE; /* rolled back: nothing happened, so nothing is acked */
    switch (outcome) {
    case INBOX_SETTLED:
        metrics_add(s->settled, 1);
        metrics_observe(s->accept_to_settle_seconds, accept_to_settle);
        log_info("payment_settled", "event_id=%s payment_id=%s attempt=%d amount_cents=%lld",
                 p.event_id, p.payment_id, attempt, (long long)p.amount_cents);
        if (failpoint_hit("worker.after_commit") != GW_OK)
            return VERDICT_REQUEUE;
        return VERDICT_ACK;
    case INBOX_DUPLICATE:
        metrics_add(s->duplicates, 1);
        return VERDICT_ACK;
    case INBOX_TERMINAL:
        log_warn("settle_after_dead_letter", "event_id=%s payment_id=%s", p.event_id, p.payment_id);
        return VERDICT_ACK;
    case INBOX_UNKNOWN:
        break;
    }
    metrics_add(s->dead_invalid, 1);
    log_warn("payment_unknown", "event_id=%s payment_id=%s", p.event_id, p.payment_id);
    return VERDICT_DEAD;
}

/* The one place a verdict becomes an AMQP answer. */
static gw_err answer(settler *s, uint64_t tag, verdict v)
{
    amqp_connection_state_t c = mq_state(s->consumer);
    int rc;

    switch (v) {
    case VERDICT_ACK:
    case VERDICT_RETRY:
        rc = amqp_basic_ack(c, MQ_CHANNEL, tag, 0);
        break;
    case VERDICT_DEAD:
        rc = amqp_basic_nack(c, MQ_CHANNEL, tag, 0, 0 /* no requeue: to the DLX */);
        break;
    case VERDICT_REQUEUE:
    default:
        metrics_add(s->requeued, 1);
        rc = amqp_basic_nack(c, MQ_CHANNEL, tag, 0, 1);
        break;
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

/* Wait up to 1 s for one delivery and settle it. */
static gw_err consume_one(settler *s, backoff *db_backoff, volatile sig_atomic_t *stop)
{
    struct timeval tv = {1,
                         0}; /* rabbitmq-c retries poll on EINTR: the timeout is our signal check */
    amqp_connection_state_t c = mq_state(s->consumer);
    amqp_envelope_t env;
    amqp_rpc_reply_t r;
    struct timespec t0;
    verdict v;
    gw_err err;

    amqp_maybe_release_buffers(c);
    r = amqp_consume_message(c, &env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        if (r.library_error == AMQP_STATUS_TIMEOUT)
            return GW_OK;
        if (r.library_error == AMQP_STATUS_UNEXPECTED_STATE)
            return on_other_frame(s);
    }
    if ((err = mq_check(r, "basic.consume")) != GW_OK)
        return GW_ERR_MQ;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    metrics_add(s->delivered, 1);
    if (env.redelivered)
        metrics_add(s->redelivered, 1);
    v = process(s, &env);
    if (v == VERDICT_REQUEUE && !*stop) {
        /* the database failed: reconnect before giving the message back */
        if (PQstatus(db_pg(s->db)) != CONNECTION_OK) {
            health_set_db(s->health, false);
            backoff_wait(db_backoff, stop);
        }
    } else {
        backoff_reset(db_backoff);
    }
    err = answer(s, env.delivery_tag, v);
    metrics_observe(s->processing_seconds, seconds_since(&t0));
    amqp_destroy_envelope(&env);
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
    backoff bo, db_bo;
    time_t next_housekeeping = 0;

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
        if (consume_one(s, &db_bo, stop) != GW_OK)
            drop_mq(s); /* unacked deliveries return to the queue; the inbox dedupes */
    }
    if (s->consumer != NULL) {
        /* stop taking new work; what was prefetched but not processed is requeued on close */
        amqp_basic_cancel(mq_state(s->consumer), MQ_CHANNEL, mq_bytes(CONSUMER_TAG));
    }
}
