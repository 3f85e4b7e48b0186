/* shared/mq_topology.c - declared by every program that uses it, after every reconnect */
#include "shared/mq_topology.h"

#include <stdio.h>

#include "shared/lib/log.h"

static gw_err declare_exchange(mq_conn *c, const char *name, const char *type)
{
    amqp_exchange_declare(mq_state(c), MQ_CHANNEL, mq_bytes(name), mq_bytes(type), 0,
                          1 /* durable */, 0, 0, amqp_empty_table);
    return mq_check(amqp_get_rpc_reply(mq_state(c)), name);
}

static void str_arg(amqp_table_entry_t *e, const char *key, const char *value)
{
    e->key = mq_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_UTF8;
    e->value.value.bytes = mq_bytes(value);
}

/* @args: room for one more entry than @nargs; x-queue-type is added here. */
static gw_err declare_queue(mq_conn *c, const gw_config *cfg, const char *name,
                            amqp_table_entry_t *args, int nargs)
{
    amqp_table_t table;

    str_arg(&args[nargs++], "x-queue-type", cfg->queue_type == QUEUE_QUORUM ? "quorum" : "classic");
    table.num_entries = nargs;
    table.entries = args;
    amqp_queue_declare(mq_state(c), MQ_CHANNEL, mq_bytes(name), 0, 1 /* durable */, 0, 0, table);
    return mq_check(amqp_get_rpc_reply(mq_state(c)), name);
}

static gw_err bind_queue(mq_conn *c, const char *queue, const char *exchange, const char *key)
{
    amqp_queue_bind(mq_state(c), MQ_CHANNEL, mq_bytes(queue), mq_bytes(exchange), mq_bytes(key),
                    amqp_empty_table);
    return mq_check(amqp_get_rpc_reply(mq_state(c)), queue);
}

static void int_arg(amqp_table_entry_t *e, const char *key, int64_t value)
{
    e->key = mq_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_I64;
    e->value.value.i64 = value;
}

/*
 * A quorum queue dead-letters at least once (docs/decisions.md, decision 20):
 * the copy stays in the source queue until the target has confirmed it. RabbitMQ
 * takes that strategy only with reject-publish.
 */
static int quorum_dead_letter_args(const gw_config *cfg, amqp_table_entry_t *args)
{
    if (cfg->queue_type != QUEUE_QUORUM)
        return 0;
    str_arg(&args[0], "x-dead-letter-strategy", "at-least-once");
    str_arg(&args[1], "x-overflow", "reject-publish");
    return 2;
}

gw_err mq_topology_declare(mq_conn *c, const gw_config *cfg)
{
    amqp_table_entry_t args[8];
    gw_err err;
    int n;

    if ((err = declare_exchange(c, MQ_EXCHANGE_EVENTS, "topic")) != GW_OK ||
        (err = declare_exchange(c, MQ_EXCHANGE_DLX, "fanout")) != GW_OK ||
        (err = declare_exchange(c, MQ_EXCHANGE_RETRY, "direct")) != GW_OK)
        return err;

    /* the one bounded buffer in the broker: a full queue nacks the relay's publishes, the rows
     * stay pending, and the API answers 503 at OUTBOX_MAX_BACKLOG (docs/decisions.md, 20) */
    str_arg(&args[0], "x-dead-letter-exchange", MQ_EXCHANGE_DLX);
    str_arg(&args[1], "x-overflow", "reject-publish");
    n = 2;
    if (cfg->settlement_max_length > 0) /* config_load() requires it; a zeroed config has none */
        int_arg(&args[n++], "x-max-length", cfg->settlement_max_length);
    if (cfg->queue_type == QUEUE_QUORUM) {
        str_arg(&args[n++], "x-dead-letter-strategy", "at-least-once");
        /* a message that kills every worker ends in the DLQ (reason delivery_limit) */
        if (cfg->delivery_limit > 0)
            int_arg(&args[n++], "x-delivery-limit", cfg->delivery_limit);
    }
    if ((err = declare_queue(c, cfg, MQ_QUEUE_SETTLEMENT, args, n)) != GW_OK ||
        (err = bind_queue(c, MQ_QUEUE_SETTLEMENT, MQ_EXCHANGE_EVENTS, MQ_BINDING_APPROVED)) !=
            GW_OK)
        return err;
    if ((err = declare_queue(c, cfg, MQ_QUEUE_DLQ, args, 0)) != GW_OK ||
        (err = bind_queue(c, MQ_QUEUE_DLQ, MQ_EXCHANGE_DLX, "")) != GW_OK)
        return err;

    for (int i = 0; i < cfg->retry_steps; i++) {
        char queue[64], key[16];

        snprintf(key, sizeof key, "%d", cfg->retry_delays_ms[i]);
        snprintf(queue, sizeof queue, MQ_QUEUE_RETRY_PREFIX "%s", key);
        args[0].key = mq_bytes("x-message-ttl");
        args[0].value.kind = AMQP_FIELD_KIND_I32;
        args[0].value.value.i32 = cfg->retry_delays_ms[i];
        str_arg(&args[1], "x-dead-letter-exchange", "");
        str_arg(&args[2], "x-dead-letter-routing-key", MQ_QUEUE_SETTLEMENT);
        n = 3 + quorum_dead_letter_args(cfg, &args[3]);
        if ((err = declare_queue(c, cfg, queue, args, n)) != GW_OK ||
            (err = bind_queue(c, queue, MQ_EXCHANGE_RETRY, key)) != GW_OK)
            return err;
    }
    log_info("mq_topology_declared", "queue_type=%s retry_steps=%d",
             cfg->queue_type == QUEUE_QUORUM ? "quorum" : "classic", cfg->retry_steps);
    return GW_OK;
}
