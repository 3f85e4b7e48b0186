/* api/admin/dlq_broker.h - the admin's one broker connection: taking letters off the DLQ with
 * basic.get, acking or requeueing them, and publishing replays under confirms */
#ifndef API_ADMIN_DLQ_BROKER_H
#define API_ADMIN_DLQ_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include <amqp.h>
#include <jansson.h>

#include "shared/amqp/mq.h"
#include "shared/config.h"
#include "shared/lib/err.h"

typedef struct dlq_broker dlq_broker;

/* One message taken off the DLQ and not acked yet; a public value type. */
typedef struct dlq_broker_msg {
    uint64_t tag;          /* the delivery tag on the admin channel */
    char routing_key[256]; /* as delivered: the DLX's, not necessarily the original */
    amqp_message_t msg;    /* owned: dlq_broker_msg_clear() */
} dlq_broker_msg;

void dlq_broker_msg_clear(dlq_broker_msg *m);

/*
 * dlq_broker_new - the admin side of the broker for @cfg (borrowed). The connection
 * is opened on first use and reopened after a failure; admin calls are rare, so one
 * connection serves them one at a time, under dlq_broker_lock().
 */
GW_MUSTCHECK gw_err dlq_broker_new(const gw_config *cfg, dlq_broker **out);
void dlq_broker_free(dlq_broker *b); /* accepts NULL */

/* One admin broker call at a time: every function below is called under this lock. */
void dlq_broker_lock(dlq_broker *b);
void dlq_broker_unlock(dlq_broker *b);

/*
 * dlq_broker_get - basic.get up to @max messages without ack into @out (@max entries,
 * zeroed); how many into @n. On failure the connection is dropped, and with it the
 * unacked gets, which go back to the queue.
 */
GW_MUSTCHECK gw_err dlq_broker_get(dlq_broker *b, long max, dlq_broker_msg *out, long *n);

/* dlq_broker_ack_upto - basic.ack with multiple: every message got up to @tag is done. */
void dlq_broker_ack_upto(dlq_broker *b, uint64_t tag);

/* dlq_broker_requeue_upto - basic.nack with multiple and requeue: all back to the DLQ. */
void dlq_broker_requeue_upto(dlq_broker *b, uint64_t tag);

/*
 * dlq_broker_publish - publish @m (borrowed) mandatory and wait up to 5 s for its confirm.
 * GW_ERR_NOT_FOUND when the broker returned it (the reason into @why); any other failure
 * drops the connection.
 */
GW_MUSTCHECK gw_err dlq_broker_publish(dlq_broker *b, const mq_message *m, char *why, size_t len);

/*
 * dlq_broker_queue_depths - under the lock: the settlement queue, each retry queue and the DLQ
 * with their message and consumer counts, by passive declares, as a JSON array (owned); NULL
 * when the broker cannot be asked.
 */
json_t *dlq_broker_queue_depths(dlq_broker *b);

#endif
