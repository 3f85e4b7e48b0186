/* shared/amqp/mq.c - rabbitmq-c 0.11: connect, publish, read confirms and returns by hand */
#include "shared/amqp/mq.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "shared/lib/log.h"
#include "shared/lib/metrics.h"

struct mq_conn {
    amqp_connection_state_t state;
    bool open;     /* the channel is usable */
    bool confirms; /* channel in confirm mode */
    bool blocked;  /* connection.blocked seen */
    uint64_t next_seq;
    int node; /* 1-based position of the node in the AMQP_URL list */
    char name[64];
};

/*
 * The node the last connection of this process went to (0-based). A new
 * connection tries it first, then the next ones in list order: a node that was
 * lost does not answer, so the program moves on to the next, and all of a
 * program's connections end up on one node.
 */
static atomic_int preferred_node;

/* set once by mq_metrics_attach(), before any connection; NULL: not counted */
static metric *node_gauge, *connects;
/* set once by mq_set_heartbeat(), before any connection */
static int heartbeat_s = 10;

void mq_set_heartbeat(int seconds)
{
    heartbeat_s = seconds;
}

int mq_heartbeat(void)
{
    return heartbeat_s;
}

void mq_metrics_attach(metrics *m)
{
    node_gauge =
        metrics_gauge(m, "paygw_amqp_connected_node", NULL,
                      "1-based position in AMQP_URL of the node last connected to; 0: none.");
    connects = metrics_counter(m, "paygw_amqp_connects_total", NULL,
                               "Connections opened to a broker node; each reconnect adds one.");
}

amqp_bytes_t mq_bytes(const char *s)
{
    amqp_bytes_t b = {strlen(s), (void *)s};
    return b;
}

gw_err mq_check(amqp_rpc_reply_t r, const char *op)
{
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return GW_OK;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        log_warn("mq_error", "op=%s error=\"%s\"", op, amqp_error_string2(r.library_error));
        return r.library_error == AMQP_STATUS_TIMEOUT ? GW_ERR_RETRY : GW_ERR_MQ;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            log_warn("mq_error", "op=%s channel_close=%u text=\"%.*s\"", op, m->reply_code,
                     (int)m->reply_text.len, (char *)m->reply_text.bytes);
        } else if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            log_warn("mq_error", "op=%s connection_close=%u text=\"%.*s\"", op, m->reply_code,
                     (int)m->reply_text.len, (char *)m->reply_text.bytes);
        } else {
            log_warn("mq_error", "op=%s server_method=0x%08x", op, (unsigned)r.reply.id);
        }
        return GW_ERR_MQ;
    default:
        log_warn("mq_error", "op=%s error=\"no reply\"", op);
        return GW_ERR_MQ;
    }
}

static gw_err mq_login(mq_conn *c, const struct amqp_connection_info *info)
{
    amqp_table_entry_t caps[] = {
        {mq_bytes("consumer_cancel_notify"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {mq_bytes("connection.blocked"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {mq_bytes("publisher_confirms"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
        {mq_bytes("basic.nack"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}},
    };
    amqp_table_entry_t props[2];
    amqp_table_t table;

    props[0].key = mq_bytes("capabilities");
    props[0].value.kind = AMQP_FIELD_KIND_TABLE;
    props[0].value.value.table.num_entries = sizeof caps / sizeof caps[0];
    props[0].value.value.table.entries = caps;
    props[1].key = mq_bytes("connection_name");
    props[1].value.kind = AMQP_FIELD_KIND_UTF8;
    props[1].value.value.bytes = mq_bytes(c->name);
    table.num_entries = 2;
    table.entries = props;
    return mq_check(amqp_login_with_properties(c->state, info->vhost, 0, 131072, heartbeat_s,
                                               &table, AMQP_SASL_METHOD_PLAIN, info->user,
                                               info->password),
                    "login");
}

static gw_err open_one(const char *url, const char *cacert, const char *name, bool confirms,
                       mq_conn **out)
{
    struct amqp_connection_info info;
    struct timeval tv = {3, 0};
    amqp_socket_t *sock;
    mq_conn *c = calloc(1, sizeof *c);
    char *copy = strdup(url);
    gw_err err = GW_ERR_MQ;
    int rc;

    if (c == NULL || copy == NULL) {
        free(c);
        free(copy);
        return GW_ERR_NOMEM;
    }
    snprintf(c->name, sizeof c->name, "%s", name);
    c->next_seq = 1;
    if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK)
        goto fail;
    c->state = amqp_new_connection();
    sock = c->state == NULL ? NULL
           : info.ssl       ? amqp_ssl_socket_new(c->state)
                            : amqp_tcp_socket_new(c->state);
    if (sock == NULL)
        goto fail;
    if (info.ssl) {
        /* amqps: the peer and its host name are verified (rabbitmq-c's default); the CA
         * bundle is AMQP_CACERT when set (checked by config_load()), else the system's */
        const char *ca = cacert != NULL ? cacert : "/etc/ssl/certs/ca-certificates.crt";
        if (amqp_ssl_socket_set_cacert(sock, ca) != AMQP_STATUS_OK) {
            log_warn("mq_tls_cacert_failed", "path=%s", cacert != NULL ? cacert : "system");
            goto fail;
        }
    }
    amqp_set_handshake_timeout(c->state, &tv);
    tv.tv_sec = 5; /* below the 10 s stop deadline */
    amqp_set_rpc_timeout(c->state, &tv);
    tv.tv_sec = 3;
    rc = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (rc != AMQP_STATUS_OK) {
        log_warn("mq_connect_failed", "host=%s port=%d error=\"%s\"", info.host, info.port,
                 amqp_error_string2(rc));
        goto fail;
    }
    if ((err = mq_login(c, &info)) != GW_OK)
        goto fail;
    amqp_channel_open(c->state, MQ_CHANNEL);
    if ((err = mq_check(amqp_get_rpc_reply(c->state), "channel.open")) != GW_OK)
        goto fail;
    if (confirms) {
        amqp_confirm_select(c->state, MQ_CHANNEL);
        if ((err = mq_check(amqp_get_rpc_reply(c->state), "confirm.select")) != GW_OK)
            goto fail;
        c->confirms = true;
    }
    c->open = true;
    log_info("mq_connected", "host=%s port=%d vhost=%s name=%s", info.host, info.port, info.vhost,
             name);
    free(copy);
    *out = c;
    return GW_OK;
fail:
    free(copy);
    c->open = false;
    mq_close(c);
    return err == GW_OK ? GW_ERR_MQ : err;
}

int mq_url_count(const char *urls)
{
    int n = 1;

    for (const char *p = urls; *p != '\0'; p++)
        n += *p == ',';
    return n;
}

bool mq_url_at(const char *urls, int i, char *buf, size_t len)
{
    const char *start = urls, *end;

    for (; i > 0; i--) {
        start = strchr(start, ',');
        if (start == NULL)
            return false;
        start++;
    }
    end = strchr(start, ',');
    if (end == NULL)
        end = start + strlen(start);
    if ((size_t)(end - start) >= len)
        return false;
    memcpy(buf, start, (size_t)(end - start));
    buf[end - start] = '\0';
    return true;
}

gw_err mq_open(const char *urls, const char *cacert, const char *name, bool confirms, mq_conn **out)
{
    int n = mq_url_count(urls), first = atomic_load(&preferred_node) % n;
    gw_err err = GW_ERR_MQ;
    char url[1024];

    for (int k = 0; k < n; k++) {
        int i = (first + k) % n;

        if (!mq_url_at(urls, i, url, sizeof url)) {
            log_warn("mq_url_invalid", "node=%d", i + 1);
            continue;
        }
        err = open_one(url, cacert, name, confirms, out);
        if (err == GW_OK) {
            (*out)->node = i + 1;
            atomic_store(&preferred_node, i);
            if (connects != NULL) {
                metrics_add(connects, 1);
                metrics_set(node_gauge, i + 1);
            }
            if (n > 1)
                log_info("mq_node_connected", "node=%d nodes=%d name=%s", i + 1, n, name);
            return GW_OK;
        }
        if (err == GW_ERR_NOMEM)
            return err;
    }
    return err;
}

int mq_node(const mq_conn *c)
{
    return c != NULL && c->open ? c->node : 0;
}

void mq_close(mq_conn *c)
{
    if (c == NULL)
        return;
    if (c->state != NULL) {
        /* best effort: the peer may be gone already; a blocked connection is not read by the
         * broker, so a close would only wait out the rpc timeout twice */
        if (c->open && !c->blocked) {
            (void)amqp_channel_close(c->state, MQ_CHANNEL, AMQP_REPLY_SUCCESS);
            (void)amqp_connection_close(c->state, AMQP_REPLY_SUCCESS);
        }
        amqp_destroy_connection(c->state);
    }
    if (node_gauge != NULL && c->node == atomic_load(&preferred_node) + 1)
        metrics_set(node_gauge, 0);
    free(c);
}

amqp_connection_state_t mq_state(mq_conn *c)
{
    return c->state;
}

int mq_fd(mq_conn *c)
{
    return c->open ? amqp_get_sockfd(c->state) : -1;
}

gw_err mq_queue_counts(mq_conn *c, const char *queue, uint32_t *messages, uint32_t *consumers)
{
    amqp_queue_declare_ok_t *ok;

    if (!c->open)
        return GW_ERR_MQ;
    ok = amqp_queue_declare(c->state, MQ_CHANNEL, mq_bytes(queue), 1 /* passive */, 0, 0, 0,
                            amqp_empty_table);
    /* a timed-out RPC leaves its answer on the wire, a 404 closes the channel: both end it */
    if (mq_check(amqp_get_rpc_reply(c->state), "queue.declare.passive") != GW_OK || ok == NULL) {
        c->open = false;
        return GW_ERR_MQ;
    }
    *messages = ok->message_count;
    *consumers = ok->consumer_count;
    return GW_OK;
}

bool mq_has_queued(mq_conn *c)
{
    return c->open && (amqp_frames_enqueued(c->state) || amqp_data_in_buffer(c->state));
}

bool mq_blocked(const mq_conn *c)
{
    return c->blocked;
}

static void set_header(amqp_table_entry_t *e, const char *key, const char *value)
{
    e->key = mq_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_UTF8;
    e->value.value.bytes = mq_bytes(value);
}

gw_err mq_publish(mq_conn *c, const mq_message *m, uint64_t *seq)
{
    amqp_table_entry_t h[32];
    amqp_basic_properties_t p;
    amqp_bytes_t body = {m->len, (void *)m->body};
    int n = 0, rc;

    if (!c->open)
        return GW_ERR_MQ;
    memset(&p, 0, sizeof p);
    h[n].key = mq_bytes("x-attempt");
    h[n].value.kind = AMQP_FIELD_KIND_I64;
    h[n++].value.value.i64 = m->attempt;
    if (m->last_error != NULL)
        set_header(&h[n++], "x-last-error", m->last_error);
    if (m->traceparent != NULL)
        set_header(&h[n++], "traceparent", m->traceparent);
    if (m->extra_headers != NULL) {
        for (int i = 0; i < m->extra_headers->num_entries && n < 32; i++)
            h[n++] = m->extra_headers->entries[i];
    }
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_HEADERS_FLAG;
    p.content_type = mq_bytes("application/json");
    p.delivery_mode = 2; /* persistent */
    p.message_id = mq_bytes(m->message_id);
    p.timestamp = m->timestamp ? m->timestamp : (uint64_t)time(NULL);
    p.headers.num_entries = n;
    p.headers.entries = h;
    if (m->type != NULL) {
        p._flags |= AMQP_BASIC_TYPE_FLAG;
        p.type = mq_bytes(m->type);
    }
    rc = amqp_basic_publish(c->state, MQ_CHANNEL, mq_bytes(m->exchange), mq_bytes(m->routing_key),
                            1 /* mandatory */, 0, &p, body);
    if (rc != AMQP_STATUS_OK) {
        log_warn("mq_publish_failed", "message_id=%s error=\"%s\"", m->message_id,
                 amqp_error_string2(rc));
        c->open = false;
        return GW_ERR_MQ;
    }
    if (seq != NULL)
        *seq = c->next_seq;
    if (c->confirms)
        c->next_seq++;
    return GW_OK;
}

static void copy_bytes(char *dst, size_t len, amqp_bytes_t b)
{
    size_t n = b.len < len - 1 ? b.len : len - 1;

    memcpy(dst, b.bytes, n);
    dst[n] = '\0';
}

/* A basic.return: its content frames follow and must be read off the wire. */
static gw_err read_return(mq_conn *c, const amqp_basic_return_t *ret, mq_event *ev)
{
    amqp_message_t msg;
    gw_err err;

    ev->kind = MQ_EV_RETURN;
    ev->reply_code = ret->reply_code;
    copy_bytes(ev->reply_text, sizeof ev->reply_text, ret->reply_text);
    err = mq_check(amqp_read_message(c->state, MQ_CHANNEL, &msg, 0), "basic.return");
    if (err != GW_OK) {
        c->open = false;
        return GW_ERR_MQ;
    }
    if (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        copy_bytes(ev->message_id, sizeof ev->message_id, msg.properties.message_id);
    amqp_destroy_message(&msg);
    return GW_OK;
}

static gw_err confirm_event(mq_event_kind kind, uint64_t tag, amqp_boolean_t multiple, mq_event *ev)
{
    ev->kind = kind;
    ev->tag = tag;
    ev->multiple = multiple != 0;
    return GW_OK;
}

/* The broker closed our channel or the connection: answer close-ok, and the connection is done. */
static gw_err peer_closed(mq_conn *c, const amqp_frame_t *f)
{
    if (f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = f->payload.method.decoded;
        amqp_channel_close_ok_t ok = {0};

        log_warn("mq_channel_closed", "name=%s code=%u text=\"%.*s\"", c->name, m->reply_code,
                 (int)m->reply_text.len, (char *)m->reply_text.bytes);
        (void)amqp_send_method(c->state, MQ_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    } else {
        amqp_connection_close_t *m = f->payload.method.decoded;
        amqp_connection_close_ok_t ok = {0};

        log_warn("mq_connection_closed", "name=%s code=%u text=\"%.*s\"", c->name, m->reply_code,
                 (int)m->reply_text.len, (char *)m->reply_text.bytes);
        (void)amqp_send_method(c->state, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    }
    c->open = false;
    return GW_ERR_MQ;
}

gw_err mq_next_event(mq_conn *c, int timeout_ms, mq_event *ev)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    amqp_frame_t f;
    int rc;

    if (!c->open)
        return GW_ERR_MQ;
    memset(ev, 0, sizeof *ev);
    amqp_maybe_release_buffers(c->state);
    rc = amqp_simple_wait_frame_noblock(c->state, &f, &tv);
    if (rc == AMQP_STATUS_TIMEOUT)
        return GW_ERR_RETRY;
    if (rc != AMQP_STATUS_OK) {
        log_warn("mq_read_failed", "name=%s error=\"%s\"", c->name, amqp_error_string2(rc));
        c->open = false;
        return GW_ERR_MQ;
    }
    ev->kind = MQ_EV_OTHER;
    if (f.frame_type != AMQP_FRAME_METHOD)
        return GW_OK; /* a stray content frame: nothing we wait for */
    switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        const amqp_basic_ack_t *a = f.payload.method.decoded;
        return confirm_event(MQ_EV_ACK, a->delivery_tag, a->multiple, ev);
    }
    case AMQP_BASIC_NACK_METHOD: {
        const amqp_basic_nack_t *a = f.payload.method.decoded;
        return confirm_event(MQ_EV_NACK, a->delivery_tag, a->multiple, ev);
    }
    case AMQP_BASIC_RETURN_METHOD:
        return read_return(c, f.payload.method.decoded, ev);
    case AMQP_CONNECTION_BLOCKED_METHOD:
        c->blocked = true;
        ev->kind = MQ_EV_BLOCKED;
        log_warn("mq_blocked", "name=%s", c->name);
        return GW_OK;
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
        c->blocked = false;
        ev->kind = MQ_EV_UNBLOCKED;
        log_info("mq_unblocked", "name=%s", c->name);
        return GW_OK;
    case AMQP_BASIC_CANCEL_METHOD:
        ev->kind = MQ_EV_CANCEL;
        log_warn("mq_consumer_cancelled", "name=%s", c->name);
        return GW_OK;
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD:
        return peer_closed(c, &f);
    default:
        return GW_OK;
    }
}

gw_err mq_keepalive(mq_conn *c)
{
    mq_event ev;
    gw_err err;

    if (c == NULL)
        return GW_ERR_MQ;
    /* a zero wait still sends a due heartbeat: rabbitmq-c does so before it reads */
    while ((err = mq_next_event(c, 0, &ev)) == GW_OK)
        ;
    return err == GW_ERR_RETRY ? GW_OK : err;
}

static long ms_since(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

gw_err mq_publish_confirmed_many(mq_conn *c, const mq_message *ms, size_t n, int timeout_ms,
                                 gw_err *each, char *why, size_t why_len)
{
    uint64_t first = 0, seq = 0;
    bool *returned = calloc(n + 1, sizeof *returned), *settled = calloc(n + 1, sizeof *settled);
    size_t left = n;
    struct timespec t0;
    mq_event ev;
    gw_err err = GW_OK;

    if (why != NULL)
        snprintf(why, why_len, "not confirmed");
    if (returned == NULL || settled == NULL) {
        err = GW_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        each[i] = GW_ERR_MQ; /* until its confirm says otherwise */
        if ((err = mq_publish(c, &ms[i], &seq)) != GW_OK)
            goto out;
        if (i == 0)
            first = seq; /* the tags that follow are consecutive: message i has first + i */
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0) {
        long wait = timeout_ms - ms_since(&t0);

        if (wait <= 0) {
            c->open = false; /* a late confirm would confuse the next wait: reconnect */
            err = GW_ERR_MQ;
            goto out;
        }
        err = mq_next_event(c, (int)wait, &ev);
        if (err == GW_ERR_RETRY)
            continue;
        if (err != GW_OK)
            goto out;
        if (ev.kind == MQ_EV_RETURN) { /* its ack follows; the id names it (or its twins) */
            for (size_t i = 0; i < n; i++)
                returned[i] |= strcmp(ev.message_id, ms[i].message_id) == 0;
            if (why != NULL)
                snprintf(why, why_len, "%d %s", ev.reply_code, ev.reply_text);
            continue;
        }
        if (ev.kind != MQ_EV_ACK && ev.kind != MQ_EV_NACK)
            continue;
        if (ev.kind == MQ_EV_NACK && why != NULL)
            snprintf(why, why_len, "nacked by the broker");
        for (size_t i = 0; i < n; i++) {
            uint64_t tag = first + i;
            if (settled[i] || (ev.multiple ? tag > ev.tag : tag != ev.tag))
                continue;
            settled[i] = true;
            left--;
            each[i] = ev.kind == MQ_EV_NACK ? GW_ERR_MQ : returned[i] ? GW_ERR_NOT_FOUND : GW_OK;
        }
    }
out:
    free(returned);
    free(settled);
    return err;
}

gw_err mq_publish_confirmed(mq_conn *c, const mq_message *m, int timeout_ms, char *why,
                            size_t why_len)
{
    gw_err each = GW_ERR_MQ;
    gw_err err = mq_publish_confirmed_many(c, m, 1, timeout_ms, &each, why, why_len);

    return err != GW_OK ? err : each;
}
