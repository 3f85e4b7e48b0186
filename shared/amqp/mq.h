/* shared/amqp/mq.h - one RabbitMQ connection (rabbitmq-c 0.11) with checked replies */
#ifndef SHARED_AMQP_MQ_H
#define SHARED_AMQP_MQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <amqp.h>

#include "shared/lib/err.h"
#include "shared/lib/metrics.h"

#define MQ_CHANNEL 1

typedef struct mq_conn mq_conn;

/*
 * mq_open - connect to the first node of @urls that answers (see below), as
 * @name (connection_name), with heartbeats and the consumer_cancel_notify and
 * connection.blocked capabilities advertised, and open channel MQ_CHANNEL.
 * With @confirms the channel is put in confirm mode. An amqps:// URL verifies
 * the broker against the CA bundle @cacert (a PEM file, gw_config.amqp_cacert;
 * NULL: the system's). On GW_OK *@out is owned by the caller (mq_close()).
 */
GW_MUSTCHECK gw_err mq_open(const char *urls, const char *cacert, const char *name, bool confirms,
                            mq_conn **out);

/*
 * @urls is one AMQP URL or a comma-separated list, one per node of a cluster.
 * mq_open() tries first the node this process last connected to, then the
 * next ones in list order, so a program moves on when its node is lost.
 */
int mq_url_count(const char *urls);
/* mq_url_at - copy the @i-th (0-based) URL of @urls into @buf; false if absent or too long. */
bool mq_url_at(const char *urls, int i, char *buf, size_t len);
/* mq_metrics_attach - count connections and show the node in @m (call once, at start-up). */
void mq_metrics_attach(metrics *m);
/*
 * mq_set_heartbeat - the heartbeat, in seconds, the connections opened from now on ask for
 * (AMQP_HEARTBEAT_S; 10 until called). Call at start-up, before any connection.
 */
void mq_set_heartbeat(int seconds);
int mq_heartbeat(void);
/* mq_node - the 1-based position in the list of the node @c is connected to; 0 when closed. */
int mq_node(const mq_conn *c);
void mq_close(mq_conn *c); /* closes politely when it can; accepts NULL */

/* mq_state - the rabbitmq-c handle, borrowed. */
amqp_connection_state_t mq_state(mq_conn *c);

/* mq_fd - the socket, for poll(); -1 when closed. */
int mq_fd(mq_conn *c);

/* mq_check - GW_OK for a normal reply; logs and maps anything else (timeout -> GW_ERR_RETRY). */
GW_MUSTCHECK gw_err mq_check(amqp_rpc_reply_t r, const char *op);

/* mq_bytes - a borrowed amqp_bytes_t view of a C string. */
amqp_bytes_t mq_bytes(const char *s);

/* A message to publish; every pointer is borrowed. */
typedef struct mq_message {
    const char *exchange;
    const char *routing_key;
    const char *message_id;
    const char *type; /* NULL: none */
    const void *body;
    size_t len;
    int64_t attempt;                   /* x-attempt */
    const char *last_error;            /* x-last-error, NULL: none */
    const char *traceparent;           /* NULL: none */
    const amqp_table_t *extra_headers; /* copied as they are, NULL: none */
    uint64_t timestamp;                /* 0: now */
} mq_message;

/*
 * mq_publish - send @m persistent, mandatory, content_type application/json,
 * with message_id, type, timestamp and headers (x-attempt, x-last-error,
 * traceparent). In confirm mode *@seq gets the delivery tag the broker will
 * confirm. Does not wait.
 */
GW_MUSTCHECK gw_err mq_publish(mq_conn *c, const mq_message *m, uint64_t *seq);

typedef enum mq_event_kind {
    MQ_EV_ACK,     /* tag, multiple */
    MQ_EV_NACK,    /* tag, multiple */
    MQ_EV_RETURN,  /* message_id, reply_code, reply_text: an ack for it follows */
    MQ_EV_BLOCKED, /* connection.blocked: stop publishing */
    MQ_EV_UNBLOCKED,
    MQ_EV_CANCEL, /* basic.cancel from the broker: the consumer is gone */
    MQ_EV_OTHER,
} mq_event_kind;

typedef struct mq_event {
    mq_event_kind kind;
    uint64_t tag;
    bool multiple;
    char message_id[128];
    int reply_code;
    char reply_text[128];
} mq_event;

/*
 * mq_next_event - read the next frame of interest within @timeout_ms (heartbeats
 * are handled inside). GW_OK with @ev filled; GW_ERR_RETRY on timeout; GW_ERR_MQ
 * when the channel or connection closed (reconnect).
 */
GW_MUSTCHECK gw_err mq_next_event(mq_conn *c, int timeout_ms, mq_event *ev);

/*
 * mq_keepalive - for a connection nobody reads while it idles (the worker's retry
 * publisher): read, without waiting, whatever the broker sent (its heartbeats, late
 * confirms, which are dropped) and send our heartbeat when it is due. Call it at least
 * once per heartbeat interval; else the broker closes the connection after three
 * intervals and the next publish on it fails. GW_ERR_MQ: it is closed (reopen it).
 */
GW_MUSTCHECK gw_err mq_keepalive(mq_conn *c);

/*
 * mq_publish_confirmed_many - mq_publish() each of the @n messages, then wait up to
 * @timeout_ms for all their confirms: one round trip for the lot. GW_OK when every confirm
 * came, each message's outcome in @each: GW_OK acked and routed, GW_ERR_NOT_FOUND returned
 * unroutable, GW_ERR_MQ nacked. Anything else: the outcomes are unknown (a timeout also
 * marks the connection for a reconnect). @why (may be NULL) gets the last return's reply
 * text or "nacked by the broker", else "not confirmed".
 */
GW_MUSTCHECK gw_err mq_publish_confirmed_many(mq_conn *c, const mq_message *ms, size_t n,
                                              int timeout_ms, gw_err *each, char *why,
                                              size_t why_len);

/*
 * mq_publish_confirmed - mq_publish_confirmed_many() of one message, its outcome as the
 * result: GW_OK acked and routed, GW_ERR_NOT_FOUND returned unroutable (reply text in
 * @why), GW_ERR_MQ nacked, timed out or closed: not accepted.
 */
GW_MUSTCHECK gw_err mq_publish_confirmed(mq_conn *c, const mq_message *m, int timeout_ms, char *why,
                                         size_t why_len);

/*
 * mq_queue_counts - a passive queue.declare of @queue on the channel: its ready
 * messages (*@messages) and its consumers (*@consumers). Frames that arrive
 * meanwhile (confirms, connection.blocked) are queued for mq_next_event();
 * mq_has_queued() says so. GW_ERR_MQ on any failure, and the connection is
 * then unusable (a missing queue closes the channel): reconnect.
 */
GW_MUSTCHECK gw_err mq_queue_counts(mq_conn *c, const char *queue, uint32_t *messages,
                                    uint32_t *consumers);

/* mq_has_queued - frames read but not yet given out by mq_next_event(); poll() misses them. */
bool mq_has_queued(mq_conn *c);

/* mq_blocked - whether the broker said connection.blocked and not yet unblocked. */
bool mq_blocked(const mq_conn *c);

#endif
