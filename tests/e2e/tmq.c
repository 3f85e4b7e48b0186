/* tests/e2e/tmq.c - rabbitmq-c 0.11 for the tests; every wait has a deadline */
#include "tests/e2e/tmq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "shared/amqp/mq.h"
#include "shared/amqp/mq_headers.h"
#include "shared/config.h"
#include "shared/mq_topology.h"
#include "tests/support/tproc.h"

#define CHANNEL           1
#define CONFIRM_WAIT_MS   5000
#define RPC_TIMEOUT_S     10
#define CONNECT_TIMEOUT_S 5
#define READ_ALL_MS       60000 /* a queue someone keeps filling is never "all" */

struct tmq {
    amqp_connection_state_t state;
    bool open;
    uint64_t published; /* publishes so far on this channel (its confirm sequence) */
    uint64_t confirmed; /* how many of them are acked or nacked */
    uint64_t low;       /* every tag <= low is settled */
    uint8_t *settled;   /* [tag]: acked or nacked (index 0 unused) */
    size_t cap;
    int nacked;   /* nacks since the last wait */
    int returned; /* returns since the last wait */
};

static amqp_bytes_t bytes(const char *s)
{
    amqp_bytes_t b = {strlen(s), (void *)s};
    return b;
}

static char *dup_bytes(amqp_bytes_t b)
{
    char *s = malloc(b.len + 1);

    if (s == NULL)
        abort();
    if (b.len > 0)
        memcpy(s, b.bytes, b.len);
    s[b.len] = '\0';
    return s;
}

/* Print a failed reply; true when it was normal. */
static bool reply_ok(amqp_rpc_reply_t r, const char *op)
{
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return true;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        fprintf(stderr, "tmq: %s: %s\n", op, amqp_error_string2(r.library_error));
        return false;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            fprintf(stderr, "tmq: %s: channel closed %u %.*s\n", op, m->reply_code,
                    (int)m->reply_text.len, (char *)m->reply_text.bytes);
        } else if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            fprintf(stderr, "tmq: %s: connection closed %u %.*s\n", op, m->reply_code,
                    (int)m->reply_text.len, (char *)m->reply_text.bytes);
        } else {
            fprintf(stderr, "tmq: %s: server method 0x%08x\n", op, (unsigned)r.reply.id);
        }
        return false;
    default:
        fprintf(stderr, "tmq: %s: no reply\n", op);
        return false;
    }
}

static bool open_channel(tmq *m)
{
    amqp_channel_open(m->state, CHANNEL);
    if (!reply_ok(amqp_get_rpc_reply(m->state), "channel.open"))
        return false;
    amqp_confirm_select(m->state, CHANNEL);
    if (!reply_ok(amqp_get_rpc_reply(m->state), "confirm.select"))
        return false;
    m->published = m->confirmed = m->low = 0;
    m->nacked = m->returned = 0;
    m->open = true;
    return true;
}

/*
 * After a server exception: a channel.close is answered and the channel
 * reopened (the connection stays); a connection.close leaves @m closed.
 */
static void recover(tmq *m, amqp_rpc_reply_t r)
{
    if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION) {
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
            m->open = false;
        return;
    }
    if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_ok_t ok = {0};
        (void)amqp_send_method(m->state, CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        if (!open_channel(m))
            m->open = false;
    } else if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_ok_t ok = {0};
        (void)amqp_send_method(m->state, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        m->open = false;
    }
}

static tmq *connect_one(const char *url)
{
    struct amqp_connection_info info;
    struct timeval tv = {CONNECT_TIMEOUT_S, 0};
    char *copy = strdup(url);
    tmq *m = calloc(1, sizeof *m);
    amqp_socket_t *sock;
    int rc;

    if (copy == NULL || m == NULL)
        abort();
    if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK) {
        fprintf(stderr, "tmq: cannot parse %s\n", url);
        goto fail;
    }
    m->state = amqp_new_connection();
    sock = amqp_tcp_socket_new(m->state);
    if (sock == NULL)
        goto fail;
    amqp_set_handshake_timeout(m->state, &tv);
    tv.tv_sec = RPC_TIMEOUT_S;
    amqp_set_rpc_timeout(m->state, &tv);
    tv.tv_sec = CONNECT_TIMEOUT_S;
    rc = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (rc != AMQP_STATUS_OK) {
        fprintf(stderr, "tmq: connect %s:%d: %s\n", info.host, info.port, amqp_error_string2(rc));
        goto fail;
    }
    if (!reply_ok(amqp_login(m->state, info.vhost, 0, 131072, 30, AMQP_SASL_METHOD_PLAIN, info.user,
                             info.password),
                  "login") ||
        !open_channel(m))
        goto fail;
    free(copy);
    return m;
fail:
    free(copy);
    if (m->state != NULL)
        amqp_destroy_connection(m->state);
    free(m);
    return NULL;
}

tmq *tmq_connect(const char *urls)
{
    char url[1024];

    /* a cluster's list: the first node that answers */
    for (const char *p = urls; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t len = strcspn(p, ",");
        tmq *m;

        if (len >= sizeof url)
            break;
        memcpy(url, p, len);
        url[len] = '\0';
        if ((m = connect_one(url)) != NULL)
            return m;
    }
    return NULL;
}

void tmq_close(tmq *m)
{
    if (m == NULL)
        return;
    if (m->open) {
        (void)amqp_channel_close(m->state, CHANNEL, AMQP_REPLY_SUCCESS);
        (void)amqp_connection_close(m->state, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(m->state);
    free(m->settled);
    free(m);
}

bool tmq_publish_nowait(tmq *m, const tmq_pub *p)
{
    amqp_basic_properties_t props;
    amqp_table_entry_t h[2];
    int n = 0, rc;
    amqp_bytes_t body = {p->len ? p->len : strlen(p->body), (void *)p->body};

    if (!m->open)
        return false;
    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    props.delivery_mode = 2;
    if (!p->bare) {
        props._flags |= AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG;
        props.type = bytes("payment.decision");
        props.timestamp = (uint64_t)time(NULL);
    }
    if (p->content_type != NULL || !p->bare) {
        props._flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
        props.content_type = bytes(p->content_type != NULL ? p->content_type : "application/json");
    }
    if (p->message_id != NULL) {
        props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        props.message_id = bytes(p->message_id);
    }
    if (p->attempt > 0) {
        h[n].key = bytes("x-attempt");
        h[n].value.kind = AMQP_FIELD_KIND_I64;
        h[n++].value.value.i64 = p->attempt;
    }
    if (p->traceparent != NULL) {
        h[n].key = bytes("traceparent");
        h[n].value.kind = AMQP_FIELD_KIND_UTF8;
        h[n++].value.value.bytes = bytes(p->traceparent);
    }
    if (n > 0) {
        props._flags |= AMQP_BASIC_HEADERS_FLAG;
        props.headers.num_entries = n;
        props.headers.entries = h;
    }
    rc = amqp_basic_publish(m->state, CHANNEL, bytes(p->exchange ? p->exchange : ""),
                            bytes(p->routing_key), p->mandatory, 0, &props, body);
    if (rc != AMQP_STATUS_OK) {
        fprintf(stderr, "tmq: basic.publish: %s\n", amqp_error_string2(rc));
        m->open = false;
        return false;
    }
    m->published++;
    if (m->published >= m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint8_t *grown = realloc(m->settled, cap);

        if (grown == NULL)
            abort();
        memset(grown + m->cap, 0, cap - m->cap);
        m->settled = grown;
        m->cap = cap;
    }
    return true;
}

/* Settle tag @tag (and, with @multiple, every tag below it); returns how many were new. */
static int settle(tmq *m, uint64_t tag, bool multiple)
{
    int n = 0;

    if (tag > m->published)
        tag = m->published; /* never happens; do not write past the bitmap */
    for (uint64_t t = multiple ? m->low + 1 : tag; t <= tag; t++) {
        if (!m->settled[t]) {
            m->settled[t] = 1;
            m->confirmed++;
            n++;
        }
    }
    while (m->low < m->published && m->settled[m->low + 1])
        m->low++;
    return n;
}

/* Read frames until every publish is settled or the deadline passes. */
static void wait_confirms(tmq *m, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;

    while (m->open && m->confirmed < m->published) {
        long long left = deadline - tproc_now_ms();
        struct timeval tv;
        amqp_frame_t f;
        int rc;

        if (left <= 0) {
            fprintf(stderr, "tmq: %llu of %llu publishes unconfirmed after %d ms\n",
                    (unsigned long long)(m->published - m->confirmed),
                    (unsigned long long)m->published, timeout_ms);
            return;
        }
        tv.tv_sec = (time_t)(left / 1000);
        tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
        amqp_maybe_release_buffers(m->state);
        rc = amqp_simple_wait_frame_noblock(m->state, &f, &tv);
        if (rc == AMQP_STATUS_TIMEOUT)
            continue;
        if (rc != AMQP_STATUS_OK) {
            fprintf(stderr, "tmq: waiting for confirms: %s\n", amqp_error_string2(rc));
            m->open = false;
            return;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        switch (f.payload.method.id) {
        case AMQP_BASIC_ACK_METHOD: {
            amqp_basic_ack_t *a = f.payload.method.decoded;
            settle(m, a->delivery_tag, a->multiple);
            break;
        }
        case AMQP_BASIC_NACK_METHOD: {
            amqp_basic_nack_t *a = f.payload.method.decoded;
            m->nacked += settle(m, a->delivery_tag, a->multiple);
            break;
        }
        case AMQP_BASIC_RETURN_METHOD: {
            amqp_message_t msg;

            m->returned++; /* its ack follows */
            if (!reply_ok(amqp_read_message(m->state, CHANNEL, &msg, 0), "basic.return")) {
                m->open = false;
                return;
            }
            amqp_destroy_message(&msg);
            break;
        }
        case AMQP_CHANNEL_CLOSE_METHOD:
        case AMQP_CONNECTION_CLOSE_METHOD:
            fprintf(stderr, "tmq: the broker closed the channel while we published\n");
            m->open = false;
            return;
        default:
            break;
        }
    }
}

bool tmq_wait_confirms(tmq *m, int timeout_ms)
{
    bool ok;

    wait_confirms(m, timeout_ms);
    ok = m->open && m->confirmed == m->published && m->nacked == 0 && m->returned == 0;
    if (m->nacked > 0)
        fprintf(stderr, "tmq: %d publishes nacked\n", m->nacked);
    if (m->returned > 0)
        fprintf(stderr, "tmq: %d publishes returned unroutable\n", m->returned);
    m->nacked = m->returned = 0;
    return ok;
}

int tmq_publish(tmq *m, const tmq_pub *p)
{
    int rc;

    if (m->confirmed != m->published && !tmq_wait_confirms(m, CONFIRM_WAIT_MS))
        return -1; /* earlier publishes first: their fate is not this one's */
    if (!tmq_publish_nowait(m, p))
        return -1;
    wait_confirms(m, CONFIRM_WAIT_MS);
    if (!m->open || m->confirmed != m->published || m->nacked > 0)
        rc = -1;
    else
        rc = m->returned > 0 ? 0 : 1;
    m->nacked = m->returned = 0;
    return rc;
}

void tmq_msg_free(tmq_msg *msg)
{
    if (msg == NULL)
        return;
    free(msg->body);
    free(msg->message_id);
    free(msg->type);
    free(msg->content_type);
    free(msg->exchange);
    free(msg->routing_key);
    json_decref(msg->headers);
    memset(msg, 0, sizeof *msg);
}

int tmq_get(tmq *m, const char *queue, bool ack, tmq_msg *out)
{
    amqp_rpc_reply_t r;
    amqp_message_t msg;
    const amqp_basic_properties_t *p;

    memset(out, 0, sizeof *out);
    if (!m->open)
        return -1;
    amqp_maybe_release_buffers(m->state);
    r = amqp_basic_get(m->state, CHANNEL, bytes(queue), ack);
    if (!reply_ok(r, "basic.get")) {
        recover(m, r);
        return -1;
    }
    if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
        return 0;
    if (r.reply.id != AMQP_BASIC_GET_OK_METHOD) {
        fprintf(stderr, "tmq: basic.get: unexpected method 0x%08x\n", (unsigned)r.reply.id);
        return -1;
    }
    {
        amqp_basic_get_ok_t *ok = r.reply.decoded; /* copied before the body is read */
        out->delivery_tag = ok->delivery_tag;
        out->redelivered = ok->redelivered;
        out->exchange = dup_bytes(ok->exchange);
        out->routing_key = dup_bytes(ok->routing_key);
    }
    r = amqp_read_message(m->state, CHANNEL, &msg, 0);
    if (!reply_ok(r, "basic.get body")) {
        m->open = false;
        tmq_msg_free(out);
        return -1;
    }
    p = &msg.properties;
    out->body = dup_bytes(msg.body);
    out->len = msg.body.len;
    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        out->message_id = dup_bytes(p->message_id);
    if (p->_flags & AMQP_BASIC_TYPE_FLAG)
        out->type = dup_bytes(p->type);
    if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
        out->content_type = dup_bytes(p->content_type);
    if (p->_flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        out->delivery_mode = p->delivery_mode;
    if (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG) {
        out->has_timestamp = true;
        out->timestamp = p->timestamp;
    }
    out->headers =
        (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? mq_table_to_json(&p->headers) : json_object();
    amqp_destroy_message(&msg);
    return 1;
}

bool tmq_ack(tmq *m, uint64_t delivery_tag)
{
    int rc;

    if (!m->open)
        return false;
    rc = amqp_basic_ack(m->state, CHANNEL, delivery_tag, 0);
    if (rc != AMQP_STATUS_OK) {
        fprintf(stderr, "tmq: basic.ack: %s\n", amqp_error_string2(rc));
        return false;
    }
    return true;
}

long tmq_depth(tmq *m, const char *queue)
{
    amqp_queue_declare_ok_t *ok;
    amqp_rpc_reply_t r;

    if (!m->open)
        return -1;
    amqp_maybe_release_buffers(m->state);
    ok = amqp_queue_declare(m->state, CHANNEL, bytes(queue), 1 /* passive */, 0, 0, 0,
                            amqp_empty_table);
    r = amqp_get_rpc_reply(m->state);
    if (ok == NULL || !reply_ok(r, queue)) {
        recover(m, r);
        return -1;
    }
    return (long)ok->message_count;
}

long tmq_wait_depth(tmq *m, const char *queue, long want, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    long d;

    while ((d = tmq_depth(m, queue)) != want && tproc_now_ms() < deadline)
        tproc_sleep_ms(20);
    return d;
}

bool tmq_purge(tmq *m, const char *queue)
{
    amqp_rpc_reply_t r;

    if (!m->open)
        return false;
    (void)amqp_queue_purge(m->state, CHANNEL, bytes(queue));
    r = amqp_get_rpc_reply(m->state);
    if (!reply_ok(r, "queue.purge")) {
        recover(m, r);
        return false;
    }
    return true;
}

tmq_msg *tmq_read_all(tmq *m, const char *queue, bool take, size_t *n)
{
    long long deadline = tproc_now_ms() + READ_ALL_MS;
    size_t cap = 256;
    tmq_msg *all = calloc(cap, sizeof *all);

    *n = 0;
    if (all == NULL)
        abort();
    for (;;) {
        int rc;

        if (tproc_now_ms() > deadline) {
            fprintf(stderr, "tmq: %s still not empty after %zu messages and %d ms\n", queue, *n,
                    READ_ALL_MS);
            tmq_msgs_free(all, *n);
            *n = 0;
            return NULL;
        }

        if (*n == cap) {
            tmq_msg *more = realloc(all, cap * 2 * sizeof *all);
            if (more == NULL)
                abort();
            all = more;
            cap *= 2;
        }
        rc = tmq_get(m, queue, take, &all[*n]);
        if (rc == 0)
            return all;
        if (rc < 0) {
            tmq_msgs_free(all, *n);
            *n = 0;
            return NULL;
        }
        (*n)++;
    }
}

void tmq_msgs_free(tmq_msg *msgs, size_t n)
{
    if (msgs == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        tmq_msg_free(&msgs[i]);
    free(msgs);
}

long long tmq_header_int(const tmq_msg *msg, const char *key)
{
    json_t *v = json_object_get(msg->headers, key);

    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

const char *tmq_header_str(const tmq_msg *msg, const char *key)
{
    return json_string_value(json_object_get(msg->headers, key));
}

json_t *tmq_x_death(const tmq_msg *msg)
{
    return mq_x_death(msg->headers);
}

bool tmq_declare_topology(const char *url, const char *retry_delays_ms)
{
    gw_config cfg;
    mq_conn *c = NULL;
    bool ok;

    memset(&cfg, 0, sizeof cfg);
    cfg.queue_type = QUEUE_CLASSIC;
    cfg.settlement_max_length = CONFIG_SETTLEMENT_MAX_LENGTH;
    cfg.delivery_limit = 20;
    if (!config_parse_delays(retry_delays_ms ? retry_delays_ms : "1000,5000", cfg.retry_delays_ms,
                             &cfg.retry_steps)) {
        fprintf(stderr, "tmq: bad delays %s\n", retry_delays_ms);
        return false;
    }
    if (mq_open(url, NULL, "e2e-topology", false, &c) != GW_OK) {
        fprintf(stderr, "tmq: cannot connect to declare the topology\n");
        return false;
    }
    ok = mq_topology_declare(c, &cfg) == GW_OK;
    mq_close(c);
    return ok;
}
