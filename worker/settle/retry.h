/* worker/settle/retry.h - delayed retries through the TTL queues, counted by our own x-attempt */
#ifndef WORKER_SETTLE_RETRY_H
#define WORKER_SETTLE_RETRY_H

#include <stdbool.h>
#include <stddef.h>

#include <amqp.h>

#include "shared/amqp/mq.h"
#include "shared/config.h"
#include "shared/lib/err.h"

#define RETRY_CONFIRM_TIMEOUT_MS 4000 /* below the 10 s stop deadline */

/*
 * retry_attempt - the x-attempt header of a delivery; 1 when absent or not an
 * integer in 1..1000. Never x-death: RabbitMQ 3.13+ no longer interprets an
 * x-death that a client republishes.
 */
int retry_attempt(const amqp_basic_properties_t *p);

/*
 * retry_exhausted - whether @attempt was the last one: there are
 * @cfg->retry_steps + 1 attempts, the first and one after each delay step.
 */
bool retry_exhausted(const gw_config *cfg, int attempt);

/* retry_delay_ms - the delay before the attempt after @attempt (1..retry_steps). */
int retry_delay_ms(const gw_config *cfg, int attempt);

/*
 * retry_publish - a copy of @env to payments.retry on @pub (a confirm-mode
 * connection), routed by the delay step of this @attempt, with x-attempt + 1
 * and x-last-error @why, and wait for its confirm. The original's message_id,
 * timestamp, traceparent and other non-x- headers are kept; x-death is not.
 * GW_OK only when the broker confirmed and routed it.
 */
GW_MUSTCHECK gw_err retry_publish(mq_conn *pub, const gw_config *cfg, const amqp_envelope_t *env,
                                  int attempt, const char *why, bool outcome_unknown);

/*
 * A retry copy whose bank outcome is unknown carries RETRY_UNKNOWN_HEADER
 * (true), so that its next attempts keep it out of the DLQ until the bank
 * says executed or not (contract section 12; docs/payments-worker.md).
 * retry_publish(@outcome_unknown) sets it; retry_outcome_unknown() reads it.
 */
#define RETRY_UNKNOWN_HEADER "x-bank-outcome-unknown"
bool retry_outcome_unknown(const amqp_basic_properties_t *p);

/* retry_bytes_str - @b as a NUL-terminated string in @out (truncated to @len - 1). */
void retry_bytes_str(amqp_bytes_t b, char *out, size_t len);

#endif
