/* api/admin/dlq_broker.c - one confirm-mode connection, opened lazily, dropped on any failure */
#include "api/admin/dlq_broker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shared/mq_topology.h"

#define CONFIRM_WAIT_MS 5000

struct dlq_broker {
    const gw_config *cfg;
    pthread_mutex_t lock; /* one admin broker call at a time */
    mq_conn *mq;          /* under lock; NULL until first use or after a failure */
    time_t used_at;       /* under lock: when mq was last used (CLOCK_MONOTONIC seconds) */
};

/*
 * Nobody reads an idle admin connection, so nobody answers the broker's heartbeats: after
 * two missed ones the broker closes it, and the next admin call would fail on it. An
 * idle connection is replaced before use instead.
 */
#define IDLE_REOPEN_S mq_heartbeat()

static time_t now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

void dlq_broker_msg_clear(dlq_broker_msg *m)
{
    amqp_destroy_message(&m->msg);
}

gw_err dlq_broker_new(const gw_config *cfg, dlq_broker **out)
{
    dlq_broker *b = calloc(1, sizeof *b);

    if (b == NULL)
        return GW_ERR_NOMEM;
    b->cfg = cfg;
    pthread_mutex_init(&b->lock, NULL);
    *out = b;
    return GW_OK;
}

void dlq_broker_free(dlq_broker *b)
{
    if (b == NULL)
        return;
    mq_close(b->mq);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

void dlq_broker_lock(dlq_broker *b)
{
    pthread_mutex_lock(&b->lock);
}

void dlq_broker_unlock(dlq_broker *b)
{
    pthread_mutex_unlock(&b->lock);
}

/* Under b->lock: a usable confirm-mode connection with the topology declared. */
static gw_err connected(dlq_broker *b)
{
    time_t now = now_s();
    gw_err err;

    if (b->mq != NULL && mq_fd(b->mq) >= 0 && now - b->used_at < IDLE_REOPEN_S) {
        b->used_at = now;
        return GW_OK;
    }
    b->used_at = now;
    mq_close(b->mq);
    b->mq = NULL;
    if ((err = mq_open(b->cfg->amqp_url, b->cfg->amqp_cacert, "payments-api-admin", true,
                       &b->mq)) != GW_OK)
        return err;
    if ((err = mq_topology_declare(b->mq, b->cfg)) != GW_OK) {
        mq_close(b->mq);
        b->mq = NULL;
    }
    return err;
}

static void failed(dlq_broker *b)
{
    mq_close(b->mq);
    b->mq = NULL;
}

static gw_err get_messages(dlq_broker *b, long max, dlq_broker_msg *out, long *n)
{
    amqp_connection_state_t c = mq_state(b->mq);

    *n = 0;
    while (*n < max) {
        amqp_rpc_reply_t r = amqp_basic_get(c, MQ_CHANNEL, mq_bytes(MQ_QUEUE_DLQ), 0);
        amqp_basic_get_ok_t *ok;
        dlq_broker_msg *m = &out[*n];

        if (mq_check(r, "basic.get") != GW_OK)
            return GW_ERR_MQ;
        if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            break;
        ok = r.reply.decoded;
        m->tag = ok->delivery_tag;
        snprintf(m->routing_key, sizeof m->routing_key, "%.*s", (int)ok->routing_key.len,
                 (const char *)ok->routing_key.bytes);
        if (mq_check(amqp_read_message(c, MQ_CHANNEL, &m->msg, 0), "basic.get.content") != GW_OK)
            return GW_ERR_MQ;
        (*n)++;
    }
    return GW_OK;
}

gw_err dlq_broker_get(dlq_broker *b, long max, dlq_broker_msg *out, long *n)
{
    gw_err err;

    *n = 0;
    err = connected(b);
    if (err == GW_OK)
        err = get_messages(b, max, out, n);
    if (err != GW_OK)
        failed(b); /* unacked gets go back to the queue with the channel */
    return err;
}

void dlq_broker_ack_upto(dlq_broker *b, uint64_t tag)
{
    if (amqp_basic_ack(mq_state(b->mq), MQ_CHANNEL, tag, 1) != AMQP_STATUS_OK)
        failed(b);
}

void dlq_broker_requeue_upto(dlq_broker *b, uint64_t tag)
{
    if (amqp_basic_nack(mq_state(b->mq), MQ_CHANNEL, tag, 1, 1) != AMQP_STATUS_OK)
        failed(b);
}

gw_err dlq_broker_publish(dlq_broker *b, const mq_message *m, char *why, size_t len)
{
    gw_err err = connected(b);

    if (err == GW_OK)
        err = mq_publish_confirmed(b->mq, m, CONFIRM_WAIT_MS, why, len);
    if (err != GW_OK && err != GW_ERR_NOT_FOUND)
        failed(b);
    return err;
}

/* One queue's depth by a passive declare: {"name", "messages", "consumers"}, NULL on failure. */
static json_t *queue_depth(dlq_broker *b, const char *name)
{
    amqp_connection_state_t c = mq_state(b->mq);
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(c, MQ_CHANNEL, mq_bytes(name), 1, 0, 0, 0, amqp_empty_table);

    if (mq_check(amqp_get_rpc_reply(c), "queue.declare.passive") != GW_OK || ok == NULL)
        return NULL;
    return json_pack("{s:s,s:I,s:I}", "name", name, "messages", (json_int_t)ok->message_count,
                     "consumers", (json_int_t)ok->consumer_count);
}

json_t *dlq_broker_queue_depths(dlq_broker *b)
{
    json_t *out = json_array(), *q = NULL;
    char name[64];

    if (connected(b) != GW_OK)
        goto failed;
    if ((q = queue_depth(b, MQ_QUEUE_SETTLEMENT)) == NULL || json_array_append_new(out, q) != 0)
        goto failed;
    for (int i = 0; i < b->cfg->retry_steps; i++) {
        snprintf(name, sizeof name, MQ_QUEUE_RETRY_PREFIX "%d", b->cfg->retry_delays_ms[i]);
        if ((q = queue_depth(b, name)) == NULL || json_array_append_new(out, q) != 0)
            goto failed;
    }
    if ((q = queue_depth(b, MQ_QUEUE_DLQ)) == NULL || json_array_append_new(out, q) != 0)
        goto failed;
    return out;
failed:
    failed(b); /* a failed passive declare closes the channel: start again next time */
    json_decref(out);
    return NULL;
}

gw_err dlq_broker_publish_many(dlq_broker *b, const mq_message *ms, size_t n, gw_err *each)
{
    gw_err err = connected(b);

    if (err == GW_OK)
        err = mq_publish_confirmed_many(b->mq, ms, n, CONFIRM_WAIT_MS, each, NULL, 0);
    if (err != GW_OK)
        failed(b);
    return err;
}
