/* api/admin/replay.c - the replayed message: what it carries and what it leaves behind */
#include "api/admin/replay.h"

#include <stdlib.h>

#include <amqp.h>

#include "shared/amqp/mq.h"
#include "shared/mq_topology.h"

/* The replay of letter @id (@l) into @m; @of and @extra hold its header and live as long. */
static void replay_message(const letters_locked *l, const char *id, amqp_table_entry_t *of,
                           amqp_table_t *extra, mq_message *m)
{
    /* names the letter: a second death is a new letter even within the same second
     * (no x- prefix: the worker's retry copies keep it) */
    *of = (amqp_table_entry_t){mq_bytes("paygw-replay-of"),
                               {AMQP_FIELD_KIND_UTF8, {.bytes = mq_bytes(id)}}};
    *extra = (amqp_table_t){1, of};
    *m = (mq_message){
        .exchange = MQ_EXCHANGE_EVENTS,
        .routing_key = l->routing_key,
        .message_id = l->message_id == NULL ? l->event_id : l->message_id,
        .type = MQ_MESSAGE_TYPE,
        .body = l->body,
        .len = l->body_len,
        .attempt = 1, /* a fresh start: x-attempt, not x-death, counts the retries */
        .traceparent = l->traceparent,
        .extra_headers = extra,
    };
}

gw_err replay_publish(dlq_broker *b, const letters_locked *l, const char *id, char *why, size_t len)
{
    amqp_table_entry_t of;
    amqp_table_t extra;
    mq_message m;
    gw_err err;

    replay_message(l, id, &of, &extra, &m);
    dlq_broker_lock(b);
    err = dlq_broker_publish(b, &m, why, len);
    dlq_broker_unlock(b);
    return err;
}

gw_err replay_publish_many(dlq_broker *b, const letters_locked *ls, const char *const *ids,
                           size_t n, gw_err *each)
{
    amqp_table_entry_t *of = calloc(n + 1, sizeof *of);
    amqp_table_t *extra = calloc(n + 1, sizeof *extra);
    mq_message *ms = calloc(n + 1, sizeof *ms);
    gw_err err = GW_ERR_NOMEM;

    if (of != NULL && extra != NULL && ms != NULL) {
        for (size_t i = 0; i < n; i++)
            replay_message(&ls[i], ids[i], &of[i], &extra[i], &ms[i]);
        dlq_broker_lock(b);
        err = dlq_broker_publish_many(b, ms, n, each);
        dlq_broker_unlock(b);
    }
    free(of);
    free(extra);
    free(ms);
    return err;
}
