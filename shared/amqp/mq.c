/* shared/amqp/mq.c - rabbitmq-c 0.11: connections (nodes, login, heartbeats), queue counts */
#include "shared/amqp/mq.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "shared/amqp/mq_conn.h"
#include "shared/lib/log.h"
#include "shared/lib/metrics.h"

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
