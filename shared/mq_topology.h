/* shared/mq_topology.h - the exchanges and queues of docs/architecture.md, "The flow" */
#ifndef SHARED_MQ_TOPOLOGY_H
#define SHARED_MQ_TOPOLOGY_H

#include "shared/amqp/mq.h"
#include "shared/config.h"

#define MQ_EXCHANGE_EVENTS    "payments.events"
#define MQ_EXCHANGE_DLX       "payments.dlx"
#define MQ_EXCHANGE_RETRY     "payments.retry"
#define MQ_QUEUE_SETTLEMENT   "payments.settlement"
#define MQ_QUEUE_DLQ          "payments.settlement.dlq"
#define MQ_QUEUE_RETRY_PREFIX "payments.retry."
#define MQ_BINDING_APPROVED   "payment.*.approved"
#define MQ_MESSAGE_TYPE       "payment.decision"

/*
 * mq_topology_declare - declare every exchange, queue and binding, durable,
 * idempotently (the same arguments each time). Queues are classic or quorum
 * by @cfg->queue_type; one delay queue per @cfg->retry_delays_ms step.
 * GW_ERR_MQ when the broker refuses (e.g. a queue exists with other arguments).
 */
GW_MUSTCHECK gw_err mq_topology_declare(mq_conn *c, const gw_config *cfg);

#endif
