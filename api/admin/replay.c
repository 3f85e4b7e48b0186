/* api/admin/replay.c - the replayed message: what it carries and what it leaves behind */
#include "api/admin/replay.h"

#include <amqp.h>

#include "shared/amqp/mq.h"
#include "shared/mq_topology.h"

gw_err replay_publish(dlq_broker *b, const letters_locked *l, const char *id, char *why, size_t len)
{
    /* names the letter: a second death is a new letter even within the same second
     * (no x- prefix: the worker's retry copies keep it) */
    amqp_table_entry_t of = {mq_bytes("paygw-replay-of"),
                             {AMQP_FIELD_KIND_UTF8, {.bytes = mq_bytes(id)}}};
    amqp_table_t extra = {1, &of};
    mq_message m = {
        .exchange = MQ_EXCHANGE_EVENTS,
        .routing_key = l->routing_key,
        .message_id = l->message_id == NULL ? l->event_id : l->message_id,
        .type = MQ_MESSAGE_TYPE,
        .body = l->body,
        .len = l->body_len,
        .attempt = 1, /* a fresh start: x-attempt, not x-death, counts the retries */
        .traceparent = l->traceparent,
        .extra_headers = &extra,
    };
    gw_err err;

    dlq_broker_lock(b);
    err = dlq_broker_publish(b, &m, why, len);
    dlq_broker_unlock(b);
    return err;
}
