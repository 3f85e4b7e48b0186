/* worker/settle/retry.c - delayed retries through the TTL queues, counted by our own x-attempt */
#include "worker/settle/retry.h"

#include <stdio.h>
#include <string.h>

#include "shared/amqp/mq_headers.h"
#include "shared/lib/log.h"
#include "shared/mq_topology.h"

int retry_attempt(const amqp_basic_properties_t *p)
{
    if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
        return 1;
    for (int i = 0; i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        int64_t v;

        if (e->key.len != 9 || memcmp(e->key.bytes, "x-attempt", 9) != 0)
            continue;
        if (!mq_field_int(&e->value, &v))
            return 1;
        return v >= 1 && v <= 1000 ? (int)v : 1;
    }
    return 1;
}

bool retry_outcome_unknown(const amqp_basic_properties_t *p)
{
    for (int i = 0; (p->_flags & AMQP_BASIC_HEADERS_FLAG) && i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];

        if (e->key.len == sizeof RETRY_UNKNOWN_HEADER - 1 &&
            memcmp(e->key.bytes, RETRY_UNKNOWN_HEADER, e->key.len) == 0)
            return e->value.kind == AMQP_FIELD_KIND_BOOLEAN && e->value.value.boolean;
    }
    return false;
}

void retry_bytes_str(amqp_bytes_t b, char *out, size_t len)
{
    size_t n = b.len < len - 1 ? b.len : len - 1;

    if (n > 0) /* an empty amqp_bytes_t may have bytes == NULL: memcpy(NULL) is undefined */
        memcpy(out, b.bytes, n);
    out[n] = '\0';
}

bool retry_exhausted(const gw_config *cfg, int attempt)
{
    return attempt >= cfg->retry_steps + 1;
}

int retry_delay_ms(const gw_config *cfg, int attempt)
{
    return cfg->retry_delays_ms[attempt - 1]; /* step i follows attempt i */
}

gw_err retry_publish(mq_conn *pub, const gw_config *cfg, const amqp_envelope_t *env, int attempt,
                     const char *why, bool outcome_unknown)
{
    const amqp_basic_properties_t *p = &env->message.properties;
    amqp_table_entry_t keep[24];
    amqp_table_t extra = {0, keep};
    char message_id[128] = "", traceparent[64] = "", key[16], reply[160];
    const char *trace = NULL;
    mq_message m = {0};
    gw_err err;

    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        retry_bytes_str(p->message_id, message_id, sizeof message_id);
    for (int i = 0; (p->_flags & AMQP_BASIC_HEADERS_FLAG) && i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        bool ours_or_broker = e->key.len >= 2 && memcmp(e->key.bytes, "x-", 2) == 0;

        if (e->key.len == 11 && memcmp(e->key.bytes, "traceparent", 11) == 0 &&
            e->value.kind == AMQP_FIELD_KIND_UTF8) {
            retry_bytes_str(e->value.value.bytes, traceparent, sizeof traceparent);
            trace = traceparent;
        } else if (!ours_or_broker && extra.num_entries < 24) {
            keep[extra.num_entries++] = *e;
        }
    }
    if (outcome_unknown && extra.num_entries < 24) {
        amqp_table_entry_t *u = &keep[extra.num_entries++];

        u->key = amqp_cstring_bytes(RETRY_UNKNOWN_HEADER);
        u->value.kind = AMQP_FIELD_KIND_BOOLEAN;
        u->value.value.boolean = 1;
    }
    snprintf(key, sizeof key, "%d", retry_delay_ms(cfg, attempt));
    m.exchange = MQ_EXCHANGE_RETRY;
    m.routing_key = key;
    m.message_id = message_id;
    m.type = MQ_MESSAGE_TYPE;
    m.body = env->message.body.bytes;
    m.len = env->message.body.len;
    m.attempt = attempt + 1;
    m.last_error = why;
    m.traceparent = trace;
    m.extra_headers = &extra;
    m.timestamp = (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG) ? p->timestamp : 0;
    err = mq_publish_confirmed(pub, &m, RETRY_CONFIRM_TIMEOUT_MS, reply, sizeof reply);
    if (err != GW_OK)
        log_warn("retry_publish_failed", "message_id=%s attempt=%d reason=\"%s\"", message_id,
                 attempt, reply);
    return err == GW_ERR_NOT_FOUND ? GW_ERR_MQ : err;
}
