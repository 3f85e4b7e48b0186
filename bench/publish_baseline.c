/*
 * bench/publish_baseline.c - the publish baseline of scripts/bench, and two small queue tools
 *
 *   publish_baseline publish -u AMQP_URL -n COUNT [-W WINDOW] [-b BODY_TEMPLATE] [-p ID_PREFIX]
 *                    [-e EXCHANGE] [-k ROUTING_KEY] [-q QUEUE_TYPE] [--declare]
 *       A plain publisher: one connection, one channel in confirm mode, every message
 *       persistent and mandatory with the properties payments-relay sets (content_type,
 *       message_id, type, timestamp, x-attempt), at most WINDOW (256) unconfirmed at a
 *       time, confirms read as they come and `multiple` honoured. BODY_TEMPLATE is the
 *       message body with every "{id}" replaced by the message id (PREFIX-1, PREFIX-2, ...).
 *       --declare declares the settlement topology (exchange, queue, binding, DLX) first,
 *       as the programs do, so it works on a fresh vhost. Prints one JSON object.
 *   publish_baseline depth -u AMQP_URL QUEUE    prints the ready message count (passive declare)
 *   publish_baseline purge -u AMQP_URL QUEUE    purges the queue, prints how many it removed
 *
 * Exit status: 0 when every message was confirmed (ack), 1 otherwise, 2 on usage errors.
 * Build: cc -O2 -o publish_baseline bench/publish_baseline.c -lrabbitmq   (rabbitmq-c 0.11)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "clock_seconds.h"

#define CH                1
#define CONFIRM_TIMEOUT_S 10

static void die(const char *what)
{
    fprintf(stderr, "publish_baseline: %s\n", what);
    exit(1);
}

static void check(amqp_rpc_reply_t r, const char *what)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        fprintf(stderr, "publish_baseline: %s: %s\n", what, amqp_error_string2(r.library_error));
    else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
             r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        fprintf(stderr, "publish_baseline: %s: %.*s\n", what, (int)m->reply_text.len,
                (char *)m->reply_text.bytes);
    } else
        fprintf(stderr, "publish_baseline: %s failed\n", what);
    exit(1);
}

static amqp_connection_state_t connect_url(const char *url)
{
    struct amqp_connection_info info;
    struct timeval tv = {5, 0};
    char *copy = strdup(url);
    amqp_connection_state_t c;
    amqp_socket_t *s;

    if (copy != NULL)
        copy[strcspn(copy, ",")] = '\0'; /* a cluster's list: its first node */
    if (copy == NULL || amqp_parse_url(copy, &info) != AMQP_STATUS_OK)
        die("bad AMQP URL");
    c = amqp_new_connection();
    s = amqp_tcp_socket_new(c);
    if (s == NULL)
        die("socket");
    amqp_set_rpc_timeout(c, &tv);
    if (amqp_socket_open_noblock(s, info.host, info.port, &tv) != AMQP_STATUS_OK)
        die("cannot connect to the broker");
    check(
        amqp_login(c, info.vhost, 0, 131072, 10, AMQP_SASL_METHOD_PLAIN, info.user, info.password),
        "login");
    amqp_channel_open(c, CH);
    check(amqp_get_rpc_reply(c), "channel.open");
    free(copy);
    return c;
}

static void close_conn(amqp_connection_state_t c)
{
    amqp_channel_close(c, CH, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
}

static void declare(amqp_connection_state_t c, const char *exchange, const char *queue_type)
{
    amqp_table_entry_t a[2];
    amqp_table_t args = {2, a};

    amqp_exchange_declare(c, CH, amqp_cstring_bytes(exchange), amqp_cstring_bytes("topic"), 0, 1, 0,
                          0, amqp_empty_table);
    check(amqp_get_rpc_reply(c), "exchange.declare");
    amqp_exchange_declare(c, CH, amqp_cstring_bytes("payments.dlx"), amqp_cstring_bytes("fanout"),
                          0, 1, 0, 0, amqp_empty_table);
    check(amqp_get_rpc_reply(c), "exchange.declare dlx");
    a[0].key = amqp_cstring_bytes("x-dead-letter-exchange");
    a[0].value.kind = AMQP_FIELD_KIND_UTF8;
    a[0].value.value.bytes = amqp_cstring_bytes("payments.dlx");
    a[1].key = amqp_cstring_bytes("x-queue-type");
    a[1].value.kind = AMQP_FIELD_KIND_UTF8;
    a[1].value.value.bytes = amqp_cstring_bytes(queue_type);
    amqp_queue_declare(c, CH, amqp_cstring_bytes("payments.settlement"), 0, 1, 0, 0, args);
    check(amqp_get_rpc_reply(c), "queue.declare");
    amqp_queue_bind(c, CH, amqp_cstring_bytes("payments.settlement"), amqp_cstring_bytes(exchange),
                    amqp_cstring_bytes("payment.*.approved"), amqp_empty_table);
    check(amqp_get_rpc_reply(c), "queue.bind");
}

/* "{id}" in @tpl replaced by @id, into @out. */
static size_t render(const char *tpl, const char *id, char *out, size_t cap)
{
    size_t n = 0, idlen = strlen(id);

    for (const char *p = tpl; *p && n + 1 < cap;) {
        if (strncmp(p, "{id}", 4) == 0) {
            if (n + idlen + 1 >= cap)
                break;
            memcpy(out + n, id, idlen);
            n += idlen;
            p += 4;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return n;
}

typedef struct counts {
    uint64_t acked, nacked, returned;
    uint64_t lo;   /* every tag <= lo is confirmed */
    uint8_t *seen; /* bitmap of confirmed tags */
} counts;

static bool seen_get(const counts *k, uint64_t t)
{
    return k->seen[t >> 3] & (1u << (t & 7));
}

/* Confirms tag @t once; returns 1 when it was not confirmed before. */
static uint64_t seen_set(counts *k, uint64_t t)
{
    if (seen_get(k, t))
        return 0;
    k->seen[t >> 3] |= (uint8_t)(1u << (t & 7));
    return 1;
}

/* Reads one frame (waiting at most @timeout, NULL: forever) and applies it. false on timeout. */
static bool read_one(amqp_connection_state_t c, struct timeval *timeout, counts *k)
{
    amqp_frame_t f;
    int rc = amqp_simple_wait_frame_noblock(c, &f, timeout);

    if (rc == AMQP_STATUS_TIMEOUT)
        return false;
    if (rc != AMQP_STATUS_OK)
        die("connection lost while waiting for confirms");
    if (f.frame_type != AMQP_FRAME_METHOD)
        return true; /* content of a basic.return */
    switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD:
    case AMQP_BASIC_NACK_METHOD: {
        bool ack = f.payload.method.id == AMQP_BASIC_ACK_METHOD;
        uint64_t tag = ack ? ((amqp_basic_ack_t *)f.payload.method.decoded)->delivery_tag
                           : ((amqp_basic_nack_t *)f.payload.method.decoded)->delivery_tag;
        bool multiple = ack ? ((amqp_basic_ack_t *)f.payload.method.decoded)->multiple
                            : ((amqp_basic_nack_t *)f.payload.method.decoded)->multiple;
        uint64_t n = 0;

        if (multiple) {
            for (uint64_t t = k->lo + 1; t <= tag; t++)
                n += seen_set(k, t);
        } else {
            n = seen_set(k, tag);
        }
        while (seen_get(k, k->lo + 1))
            k->lo++;
        if (ack)
            k->acked += n;
        else
            k->nacked += n;
        break;
    }
    case AMQP_BASIC_RETURN_METHOD:
        k->returned++;
        break;
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD:
        die("the broker closed the channel");
        break; /* not reached */
    default:
        break;
    }
    return true;
}

static int cmd_publish(const char *url, long count, int window, const char *tpl, const char *prefix,
                       const char *exchange, const char *key, const char *queue_type,
                       bool do_declare)
{
    amqp_connection_state_t c = connect_url(url);
    amqp_table_entry_t h[1];
    amqp_basic_properties_t p;
    char id[96], body[8192];
    counts k = {0};
    uint64_t published = 0;

    k.seen = calloc((size_t)count / 8 + 2, 1);
    if (k.seen == NULL)
        die("out of memory");
    size_t body_bytes = 0;
    double t0, secs;

    if (do_declare)
        declare(c, exchange, queue_type);
    amqp_confirm_select(c, CH);
    check(amqp_get_rpc_reply(c), "confirm.select");

    memset(&p, 0, sizeof p);
    h[0].key = amqp_cstring_bytes("x-attempt");
    h[0].value.kind = AMQP_FIELD_KIND_I64;
    h[0].value.value.i64 = 1;
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_HEADERS_FLAG |
               AMQP_BASIC_TYPE_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = 2;
    p.type = amqp_cstring_bytes("payment.decision");
    p.headers.num_entries = 1;
    p.headers.entries = h;

    t0 = clock_seconds(CLOCK_MONOTONIC);
    while (k.acked + k.nacked < (uint64_t)count) {
        /* keep the window full */
        while (published < (uint64_t)count && published - (k.acked + k.nacked) < (uint64_t)window) {
            amqp_bytes_t b;

            snprintf(id, sizeof id, "%s-%llu", prefix, (unsigned long long)published + 1);
            b.len = render(tpl, id, body, sizeof body);
            b.bytes = body;
            body_bytes += b.len;
            p.message_id = amqp_cstring_bytes(id);
            p.timestamp = (uint64_t)time(NULL);
            if (amqp_basic_publish(c, CH, amqp_cstring_bytes(exchange), amqp_cstring_bytes(key), 1,
                                   0, &p, b) != AMQP_STATUS_OK)
                die("basic.publish failed");
            published++;
            {
                /* take whatever confirms already arrived, without waiting */
                struct timeval zero = {0, 0};
                while (amqp_data_in_buffer(c) && read_one(c, &zero, &k))
                    ;
            }
        }
        {
            struct timeval tv = {CONFIRM_TIMEOUT_S, 0};
            if (!read_one(c, &tv, &k))
                die("no confirm within 10 s");
        }
        if (clock_seconds(CLOCK_MONOTONIC) - t0 > 3600)
            die("gave up after an hour");
    }
    secs = clock_seconds(CLOCK_MONOTONIC) - t0;
    close_conn(c);
    printf("{\"count\":%ld,\"window\":%d,\"seconds\":%.3f,\"rate\":%.1f,\"acked\":%llu,"
           "\"nacked\":%llu,\"returned\":%llu,\"avg_body_bytes\":%.0f}\n",
           count, window, secs, (double)count / secs, (unsigned long long)k.acked,
           (unsigned long long)k.nacked, (unsigned long long)k.returned,
           count > 0 ? (double)body_bytes / (double)count : 0.0);
    free(k.seen);
    return k.acked == (uint64_t)count && k.returned == 0 ? 0 : 1;
}

static int cmd_queue(const char *url, const char *queue, bool purge)
{
    amqp_connection_state_t c = connect_url(url);

    if (purge) {
        amqp_queue_purge_ok_t *ok = amqp_queue_purge(c, CH, amqp_cstring_bytes(queue));
        check(amqp_get_rpc_reply(c), "queue.purge");
        printf("%u\n", ok->message_count);
    } else {
        amqp_queue_declare_ok_t *ok =
            amqp_queue_declare(c, CH, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
        check(amqp_get_rpc_reply(c), "queue.declare passive");
        printf("%u\n", ok->message_count);
    }
    close_conn(c);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: publish_baseline publish -u URL -n COUNT [-W WINDOW] [-b TEMPLATE] "
                    "[-p PREFIX] [-e EXCHANGE] [-k KEY] [-q QUEUE_TYPE] [--declare]\n"
                    "       publish_baseline depth|purge -u URL QUEUE\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *url = getenv("AMQP_URL"), *tpl = "{\"event_id\":\"{id}\"}", *prefix = "pb",
               *exchange = "payments.events", *key = "payment.pix.approved",
               *queue_type = "classic", *queue = NULL, *cmd;
    long count = 0;
    int window = 256;
    bool do_declare = false;

    if (argc < 2)
        usage();
    cmd = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--declare") == 0) {
            do_declare = true;
            continue;
        }
        if (a[0] != '-') {
            queue = a;
            continue;
        }
        if (v == NULL)
            usage();
        i++;
        if (strcmp(a, "-u") == 0)
            url = v;
        else if (strcmp(a, "-n") == 0)
            count = atol(v);
        else if (strcmp(a, "-W") == 0)
            window = atoi(v);
        else if (strcmp(a, "-b") == 0)
            tpl = v;
        else if (strcmp(a, "-p") == 0)
            prefix = v;
        else if (strcmp(a, "-e") == 0)
            exchange = v;
        else if (strcmp(a, "-k") == 0)
            key = v;
        else if (strcmp(a, "-q") == 0)
            queue_type = v;
        else
            usage();
    }
    if (url == NULL)
        usage();
    if (strcmp(cmd, "publish") == 0) {
        if (count < 1 || window < 1)
            usage();
        return cmd_publish(url, count, window, tpl, prefix, exchange, key, queue_type, do_declare);
    }
    if ((strcmp(cmd, "depth") == 0 || strcmp(cmd, "purge") == 0) && queue != NULL)
        return cmd_queue(url, queue, strcmp(cmd, "purge") == 0);
    usage();
    return 2;
}
