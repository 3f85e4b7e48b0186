/*
 * tests/faults/test_fault_poison.c - poison messages go to the DLQ and never stall the queue
 *
 * Messages published straight to payments.settlement (the default exchange) and through
 * payments.events, with properties chosen one by one: not JSON (text, truncated, binary,
 * empty), JSON of the wrong schema, a payment the API would refuse (missing field, string amount,
 * unknown field, invalid UTF-8, a duplicate name), 1 MiB bodies (padding; 1 MiB of '['),
 * missing properties (no message_id; no properties at all; no headers and no content type and
 * no message_id), a message_id other than the event_id, and valid payments whose payment row
 * does not exist. Every one reaches payments.settlement.dlq (rejected from payments.settlement,
 * counted), nothing of them is settled, while valid payments interleaved with them (so batches
 * mix both) and one published after them settle promptly, within 5 s. A well-formed payment that
 * only lacks the x-attempt header and the content type is not poison: it settles once, on
 * attempt 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "tests/e2e/tmq.h"
#include "tests/faults/tfault.h"
#include "tests/support/tcheck.h"

#define CH         1
#define SETTLE_MS  5000
#define MIXED      10 /* valid payments interleaved with poison */
#define DLQ_MS     20000
#define MIB        (1024 * 1024)
#define SETTLEMENT "payments.settlement"
#define DLQ        "payments.settlement.dlq"

static tf_world w;
static amqp_connection_state_t conn;
static uint64_t published;

/* Which properties a raw publish carries. */
enum {
    P_MESSAGE_ID = 1,
    P_CONTENT_TYPE = 2,
    P_HEADERS = 4, /* x-attempt = 1 */
    P_PERSISTENT = 8,
    P_ALL = 15,
};

static bool reply_ok(amqp_rpc_reply_t r, const char *what)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return true;
    FAIL("%s failed (reply type %d)", what, (int)r.reply_type);
    return false;
}

static bool mq_open(const char *url)
{
    struct amqp_connection_info info;
    struct timeval tv = {5, 0};
    char *copy = strdup(url);
    amqp_socket_t *sock;
    bool ok = false;

    conn = amqp_new_connection();
    sock = amqp_tcp_socket_new(conn);
    if (copy == NULL || sock == NULL || amqp_parse_url(copy, &info) != AMQP_STATUS_OK ||
        amqp_socket_open_noblock(sock, info.host, info.port, &tv) != AMQP_STATUS_OK) {
        FAIL("cannot connect to %s", url);
        goto out;
    }
    amqp_set_rpc_timeout(conn, &tv);
    if (!reply_ok(amqp_login(conn, info.vhost, 0, 131072, 30, AMQP_SASL_METHOD_PLAIN, info.user,
                             info.password),
                  "login"))
        goto out;
    amqp_channel_open(conn, CH);
    if (!reply_ok(amqp_get_rpc_reply(conn), "channel.open"))
        goto out;
    amqp_confirm_select(conn, CH);
    ok = reply_ok(amqp_get_rpc_reply(conn), "confirm.select");
out:
    free(copy);
    return ok;
}

static void mq_close(void)
{
    amqp_channel_close(conn, CH, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

/* Publish @len bytes with the properties @props says, and wait (5 s) for the broker's ack. */
static bool publish(const char *exchange, const char *key, const void *body, size_t len,
                    unsigned props, const char *message_id)
{
    amqp_basic_properties_t p;
    amqp_table_entry_t h;
    long long deadline;

    memset(&p, 0, sizeof p);
    if (props & P_MESSAGE_ID) {
        p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p.message_id = amqp_cstring_bytes(message_id);
    }
    if (props & P_CONTENT_TYPE) {
        p._flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
        p.content_type = amqp_cstring_bytes("application/json");
    }
    if (props & P_HEADERS) {
        h.key = amqp_cstring_bytes("x-attempt");
        h.value.kind = AMQP_FIELD_KIND_I32;
        h.value.value.i32 = 1;
        p._flags |= AMQP_BASIC_HEADERS_FLAG;
        p.headers.num_entries = 1;
        p.headers.entries = &h;
    }
    if (props & P_PERSISTENT) {
        p._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
        p.delivery_mode = 2;
    }
    if (amqp_basic_publish(conn, CH, amqp_cstring_bytes(exchange), amqp_cstring_bytes(key), 0, 0,
                           &p, (amqp_bytes_t){len, (void *)body}) != AMQP_STATUS_OK) {
        FAIL("basic.publish failed");
        return false;
    }
    published++;
    deadline = tproc_now_ms() + 5000;
    while (tproc_now_ms() < deadline) {
        struct timeval tv = {0, 100000};
        amqp_frame_t f;
        int rc = amqp_simple_wait_frame_noblock(conn, &f, &tv);

        if (rc == AMQP_STATUS_TIMEOUT)
            continue;
        if (rc != AMQP_STATUS_OK)
            break;
        if (f.frame_type == AMQP_FRAME_METHOD && f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
            amqp_basic_ack_t *ack = f.payload.method.decoded;
            if (ack->delivery_tag >= published)
                return true;
        } else if (f.frame_type == AMQP_FRAME_METHOD &&
                   f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
            break;
        }
    }
    FAIL("publish %" PRIu64 " was not confirmed", published);
    return false;
}

static bool publish_str(const char *body, unsigned props, const char *message_id)
{
    return publish("", SETTLEMENT, body, strlen(body), props, message_id);
}

/* A payment body (the API's shape) for @event / @payment. */
static char *payment(const char *event, const char *payment_id)
{
    return te2e_payment_json(event, payment_id, 4200, "001", "1234-5");
}

/* A payment row in `published` state, as the relay leaves it. */
static bool row(const char *event, const char *payment_id)
{
    return CHECK(te2e_insert_payment(w.e.db, event, payment_id, 4200, "001", "1234-5"));
}

static char *status_of(const char *event)
{
    return tdb_value(w.e.db, "SELECT status FROM payments WHERE event_id = $1", event, NULL);
}

/* A valid payment, published as the relay would; true when it is settled within @ms. */
static bool valid_settles(const char *event, const char *payment_id, int ms, long long *took)
{
    char *body = payment(event, payment_id);
    long long t0 = tproc_now_ms();
    bool ok = row(event, payment_id) && publish_str(body, P_ALL, event);

    free(body);
    if (!ok)
        return false;
    for (;;) {
        char *s = status_of(event);
        bool settled = s != NULL && strcmp(s, "settled") == 0;

        free(s);
        if (settled || tproc_now_ms() - t0 >= ms) {
            *took = tproc_now_ms() - t0;
            tcheck_context("%s", event);
            ok = CHECK(settled);
            tcheck_context_clear();
            return ok;
        }
        tproc_sleep_ms(20);
    }
}

static int poison_all(void)
{
    static const char *const bodies[] = {
        "hello, I am not JSON",
        "{\"event_id\":\"poison-trunc\",",
        "",
        "{\"foo\":1}",
        "[]",
        "\"just a string\"",
        "null",
        "{\"event_id\":\"poison-noamt\",\"payment_id\":\"poison-noamt\",\"method\":\"pix\","
        "\"decision\":\"approved\",\"currency\":\"BRL\",\"payee\":{\"bank\":\"001\","
        "\"account\":\"1234-5\"}}",
        "{\"event_id\":\"poison-stramt\",\"payment_id\":\"poison-stramt\",\"method\":\"pix\","
        "\"decision\":\"approved\",\"amount_cents\":\"100\",\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"}}",
        "{\"event_id\":\"poison-extra\",\"payment_id\":\"poison-extra\",\"method\":\"pix\","
        "\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\",\"extra\":1}}",
        "{\"event_id\":\"poison-utf8\",\"payment_id\":\"poison-utf8\",\"method\":\"pix\","
        "\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"},\"payer\":{\"name\":\"Jo\xc3\x28o\"}}",
        "{\"event_id\":\"poison-dup\",\"event_id\":\"poison-dup\",\"payment_id\":\"poison-dup\","
        "\"method\":\"pix\",\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
        "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"}}",
    };
    static const char *const ids[] = {"poison-text",   "poison-trunc", "poison-empty",
                                      "poison-schema", "poison-array", "poison-string",
                                      "poison-null",   "poison-noamt", "poison-stramt",
                                      "poison-extra",  "poison-utf8",  "poison-dup"};
    int n = 0;
    char *body, *big;
    unsigned char bin[256];
    tf_rng rng;

    /* not JSON, wrong schema, refused by the API's rules; straight to the queue */
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        n += publish_str(bodies[i], P_ALL, ids[i]);
    tf_rng_init(&rng, 6);
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (unsigned char)tf_rng_next(&rng);
    n += publish("", SETTLEMENT, bin, sizeof bin, P_ALL, "poison-binary");
    /* through the exchange too, with its routing key */
    n += publish("payments.events", "payment.pix.approved", "{oops", 5, P_ALL, "poison-routed");

    /* 1 MiB: a padded object, and 1 MiB of '[' */
    big = malloc(MIB + 64);
    if (big == NULL)
        abort();
    snprintf(big, 64, "{\"event_id\":\"poison-big\",\"pad\":\"");
    memset(big + strlen(big), 'x', MIB);
    strcpy(big + MIB, "\"}");
    n += publish("", SETTLEMENT, big, strlen(big), P_ALL, "poison-big");
    memset(big, '[', MIB);
    n += publish("", SETTLEMENT, big, MIB, P_ALL, "poison-deep");
    free(big);

    /* missing properties: a valid body of an existing payment, the message_id absent */
    row("poison-noid", "poison-noid");
    body = payment("poison-noid", "poison-noid");
    n += publish_str(body, P_ALL & ~P_MESSAGE_ID, NULL);
    free(body);
    row("poison-bare", "poison-bare");
    body = payment("poison-bare", "poison-bare");
    n += publish_str(body, 0, NULL); /* no properties at all */
    free(body);
    row("poison-nohdr", "poison-nohdr");
    body = payment("poison-nohdr", "poison-nohdr");
    n += publish_str(body, P_PERSISTENT, NULL); /* no headers, no content type, no message_id */
    free(body);
    /* a message_id that is not the event_id */
    row("poison-otherid", "poison-otherid");
    body = payment("poison-otherid", "poison-otherid");
    n += publish_str(body, P_ALL, "someone-else");
    free(body);
    /* valid payments whose row does not exist: no payment at all; a payment of another event */
    body = payment("poison-norow", "poison-norow");
    n += publish_str(body, P_ALL, "poison-norow");
    free(body);
    row("poison-realevent", "poison-shared");
    body = payment("poison-fakeevent", "poison-shared");
    n += publish_str(body, P_ALL, "poison-fakeevent");
    free(body);
    return n;
}

static bool str_is(const json_t *j, const char *want)
{
    const char *v = json_string_value(j);

    return v != NULL && strcmp(v, want) == 0;
}

static void run(void)
{
    tmq *m;
    tmq_msg *msgs;
    size_t nmsgs = 0;
    long long took, t0;
    int poison, valid_between = 0;
    long dlq;
    char *s;

    if (!CHECK(tf_start(&w, TF_WORKER, NULL)) || !CHECK(mq_open(w.e.amqp_url)))
        return;
    if (!valid_settles("ok-before", "ok-before-p", SETTLE_MS, &took))
        return;
    printf("a valid payment settles in %lld ms before the poison\n", took);

    t0 = tproc_now_ms();
    poison = poison_all();
    /* valid and poison interleaved: the batches that hold poison settle their valid members */
    for (int i = 0; i < MIXED; i++) {
        char e[32], p[32], *body;

        snprintf(e, sizeof e, "ok-mid-%d", i);
        snprintf(p, sizeof p, "ok-mid-p%d", i);
        body = payment(e, p);
        if (row(e, p))
            publish_str(body, P_ALL, e);
        free(body);
        poison += publish_str(i % 2 ? "{\"poison\":true}" : "\x01\x02", P_ALL, "poison-mid");
    }
    valid_between = (int)te2e_wait_long(
        w.e.db,
        "SELECT count(*) FROM payments WHERE event_id LIKE 'ok-mid-%' AND status = 'settled'",
        MIXED, SETTLE_MS, 20);
    CHECK_INT(valid_between, MIXED);
    printf("%d poison messages published in %.2f s, %d valid ones settled between them\n", poison,
           te2e_elapsed_s(t0), valid_between);
    CHECK(valid_settles("ok-after", "ok-after-p", SETTLE_MS, &took));
    printf("the valid payment published after the poison settled in %lld ms\n", took);

    /* a well-formed payment with only x-attempt and content type missing is not poison */
    row("lenient", "lenient-p");
    s = payment("lenient", "lenient-p");
    publish_str(s, P_MESSAGE_ID | P_PERSISTENT, "lenient");
    free(s);

    m = tmq_connect(w.e.amqp_url);
    if (!CHECK(m != NULL))
        return;
    t0 = tproc_now_ms();
    while ((dlq = tmq_depth(m, DLQ)) < poison && tproc_now_ms() - t0 < DLQ_MS)
        tproc_sleep_ms(50);
    CHECK_INT(dlq, poison);
    printf("DLQ: %ld messages (%d poison published)\n", dlq, poison);
    CHECK_WAIT_LONG(w.e.db,
                    "SELECT count(*) FROM payments WHERE event_id = 'lenient' AND "
                    "status = 'settled' AND attempts = 1",
                    1, SETTLE_MS, 20);
    CHECK_INT(tmq_depth(m, SETTLEMENT), 0);
    msgs = tmq_read_all(m, DLQ, false, &nmsgs);
    if (CHECK(msgs != NULL)) {
        int from_settlement = 0, big = 0;

        for (size_t i = 0; i < nmsgs; i++) {
            json_t *xd = tmq_x_death(&msgs[i]);
            json_t *d0 = json_array_get(xd, 0);

            from_settlement += str_is(json_object_get(d0, "queue"), SETTLEMENT) &&
                               str_is(json_object_get(d0, "reason"), "rejected");
            big += msgs[i].len >= MIB;
            json_decref(xd);
        }
        CHECK_INT(from_settlement, (long long)nmsgs);
        CHECK_INT(big, 2);
        tmq_msgs_free(msgs, nmsgs);
    }
    tmq_close(m);

    /* nothing of the poison took effect; the valid ones have one effect each */
    CHECK_INT(tdb_long(w.e.db, "SELECT count(*) FROM inbox WHERE event_id LIKE 'poison%'", NULL),
              0);
    CHECK_INT(
        tdb_long(w.e.db, "SELECT count(*) FROM ledger_entries WHERE event_id LIKE 'poison%'", NULL),
        0);
    CHECK_INT(tdb_long(w.e.db,
                       "SELECT count(*) FROM payments WHERE event_id LIKE 'poison%' AND "
                       "status <> 'published'",
                       NULL),
              0);
    CHECK_INT(
        tdb_long(w.e.db, "SELECT count(*) FROM payments WHERE event_id = 'poison-norow'", NULL), 0);
    CHECK_INT(tdb_long(w.e.db, "SELECT count(*) FROM inbox", NULL), MIXED + 3);
    CHECK_INT(tdb_long(w.e.db, "SELECT count(*) FROM ledger_entries", NULL), 2 * (MIXED + 3));
    CHECK(tf_running(&w, TF_WORKER));
    printf("worker: %.0f dead-lettered as invalid, %.0f settled\n",
           tprog_metric(&w.worker, "paygw_worker_dead_lettered_total{reason=\"invalid\"}"),
           tprog_metric(&w.worker, "paygw_worker_settled_total"));
    tf_figures("poison", 0, MIXED + 3, 0, poison);
    mq_close();
    tf_stop(&w, TF_WORKER);
    tf_check_logs(&w);
}

int main(void)
{
    return tf_main(&w, "fault-poison", "test_fault_poison", run);
}
