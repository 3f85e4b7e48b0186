/* shared/amqp/mq_publish.c - publish, and read what comes back by hand: confirms, returns, closes
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "shared/amqp/mq.h"
#include "shared/amqp/mq_conn.h"
#include "shared/lib/log.h"

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
