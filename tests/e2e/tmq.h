/* tests/e2e/tmq.h - RabbitMQ for the tests: confirmed publishes, basic.get, depths, topology */
#ifndef TESTS_E2E_TMQ_H
#define TESTS_E2E_TMQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/*
 * One AMQP connection with one channel in confirm mode. Not thread-safe: one
 * thread per connection. Every call that waits has a deadline; none blocks
 * for ever on a dead broker.
 */
typedef struct tmq tmq;

/*
 * tmq_connect - connect to @urls (amqp://user:pass@host:port/vhost, or a
 * cluster's comma-separated list: the first node that answers). NULL after
 * printing why.
 */
tmq *tmq_connect(const char *urls);

/*
 * tmq_close - close the connection (best effort). Deliveries taken with
 * basic.get and not acked go back to their queues, flagged redelivered.
 * Accepts NULL.
 */
void tmq_close(tmq *m);

/* A message to publish; pointers are borrowed for the call. */
typedef struct tmq_pub {
    const char *exchange;    /* "" (or NULL): the default exchange, routing_key = queue */
    const char *routing_key; /* e.g. "payment.pix.approved" */
    const void *body;
    size_t len;              /* 0: strlen(body) */
    const char *message_id;  /* NULL: no message_id property */
    int attempt;             /* x-attempt header; 0: no header at all */
    const char *traceparent; /* NULL: none */
    bool mandatory;          /* a returned publish is reported (tmq_publish returns 0) */
    /*
     * bare: only delivery_mode and what is set here, content_type included
     * (NULL: none); no type, no timestamp. What a foreign or broken publisher
     * could send. Without bare, content_type NULL means application/json.
     */
    bool bare;
    const char *content_type;
} tmq_pub;

/*
 * tmq_publish - publish @p persistent (delivery_mode 2), content_type
 * application/json, type payment.decision, timestamp now (unless @p is bare),
 * then wait (5 s) for the broker's confirm. Returns 1 when acked (and, if mandatory, routed), 0
 * when returned unroutable, -1 when nacked, not confirmed in time or on error.
 */
int tmq_publish(tmq *m, const tmq_pub *p);

/*
 * tmq_publish_nowait - publish without waiting; tmq_wait_confirms() waits for
 * every outstanding confirm. Publish no more than a few thousand between two
 * waits. Other calls on @m must not come in between.
 */
bool tmq_publish_nowait(tmq *m, const tmq_pub *p);

/*
 * tmq_wait_confirms - wait up to @timeout_ms until every publish so far is
 * confirmed. True when all were acked and none returned.
 */
bool tmq_wait_confirms(tmq *m, int timeout_ms);

/* A message read with basic.get. Free with tmq_msg_free(). */
typedef struct tmq_msg {
    char *body; /* owned, NUL-terminated (the body may hold NUL bytes: use len) */
    size_t len;
    char *message_id;   /* owned; NULL when the property is absent */
    char *type;         /* owned; NULL when absent */
    char *content_type; /* owned; NULL when absent */
    char *exchange;     /* owned: the exchange it was published to ("" for the default) */
    char *routing_key;  /* owned */
    int delivery_mode;  /* 0 when absent */
    bool has_timestamp;
    uint64_t timestamp; /* seconds since the epoch */
    json_t *headers;    /* owned: the headers table as JSON ({} when none) */
    bool redelivered;
    uint64_t delivery_tag;
} tmq_msg;

void tmq_msg_free(tmq_msg *msg); /* accepts a zeroed message */

/*
 * tmq_get - basic.get one message of @queue into @out. With @ack the broker
 * forgets it at once (no_ack); without, it stays unacked on this connection
 * until tmq_ack() or tmq_close(). Returns 1 (a message), 0 (queue empty) or
 * -1 (error).
 */
int tmq_get(tmq *m, const char *queue, bool ack, tmq_msg *out);

/* tmq_ack - acknowledge one delivery taken with tmq_get(..., false, ...). */
bool tmq_ack(tmq *m, uint64_t delivery_tag);

/*
 * tmq_depth - the ready messages of @queue (a passive queue.declare); -1 when
 * the queue does not exist or on error. Unacked deliveries are not counted.
 */
long tmq_depth(tmq *m, const char *queue);

/*
 * tmq_wait_depth - poll tmq_depth() until it is @want or @timeout_ms passes;
 * the last depth.
 */
long tmq_wait_depth(tmq *m, const char *queue, long want, int timeout_ms);

/* tmq_purge - delete every ready message of @queue. */
bool tmq_purge(tmq *m, const char *queue);

/*
 * tmq_read_all - every message @queue holds now. With @take they are
 * consumed (acked); without, they stay unacked on @m until tmq_close(), which
 * returns them to the queue (flagged redelivered). A new array of *@n
 * messages (tmq_msgs_free()); NULL on error, or when the queue is not empty
 * after 60 s (someone keeps filling it).
 */
tmq_msg *tmq_read_all(tmq *m, const char *queue, bool take, size_t *n);
void tmq_msgs_free(tmq_msg *msgs, size_t n);

/* tmq_header_int - the integer header @key of @msg; -1 when absent or not an integer. */
long long tmq_header_int(const tmq_msg *msg, const char *key);

/* tmq_header_str - the string header @key of @msg, borrowed; NULL when absent. */
const char *tmq_header_str(const tmq_msg *msg, const char *key);

/*
 * tmq_x_death - the x-death header of @msg in the contract's shape
 * ([{"queue","reason","count",...}], newest first) as a new reference; an
 * empty array when absent.
 */
json_t *tmq_x_death(const tmq_msg *msg);

/*
 * tmq_declare_topology - declare the exchanges, queues and bindings of
 * docs/architecture.md, "The flow" on @url exactly as the programs do (shared/mq_topology.c),
 * with the delay steps @retry_delays_ms ("1000,5000"; NULL: the default).
 */
bool tmq_declare_topology(const char *url, const char *retry_delays_ms);

#endif
