/* shared/amqp/mq_conn.h - the connection as shared/amqp/mq.c and mq_publish.c see it */
#ifndef SHARED_AMQP_MQ_CONN_H
#define SHARED_AMQP_MQ_CONN_H

#include "shared/amqp/mq.h"

/* Private to shared/amqp/: every other module holds an mq_conn * and calls mq.h. */
struct mq_conn {
    amqp_connection_state_t state;
    bool open;     /* the channel is usable */
    bool confirms; /* channel in confirm mode */
    bool blocked;  /* connection.blocked seen */
    uint64_t next_seq;
    int node; /* 1-based position of the node in the AMQP_URL list */
    char name[64];
};

#endif
