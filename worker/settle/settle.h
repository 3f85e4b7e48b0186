/* worker/settle/settle.h - payments-worker: consume, settle once, retry or dead-letter, then ack */
#ifndef WORKER_SETTLE_SETTLE_H
#define WORKER_SETTLE_SETTLE_H

#include <signal.h>

#include "shared/config.h"
#include "shared/http/health.h"
#include "shared/lib/err.h"
#include "shared/lib/metrics.h"
#include "worker/settle/bank.h"

#define SETTLE_BATCH_MAX                                                                           \
    256 /* deliveries applied in one transaction, at most half the prefetch                        \
         */

typedef struct settler settler;

/*
 * settler_new - a consumer for @cfg, settling through @b (both borrowed),
 * registering its series in @registry (before the metrics server starts).
 * Owned by the caller (settler_free()).
 */
GW_MUSTCHECK gw_err settler_new(const gw_config *cfg, const bank *b, metrics *registry,
                                settler **out);
void settler_free(settler *s); /* accepts NULL */

/* settler_set_health - where to report readiness (borrowed, may be NULL). */
void settler_set_health(settler *s, health *h);

/*
 * settler_run - consume payments.settlement until *@stop; reconnect with
 * capped back-off. On stop the consumer is cancelled and the delivery in hand
 * is finished (COMMIT, then ack) before it returns; unacked prefetched
 * deliveries go back to the queue when the channel closes.
 */
void settler_run(settler *s, volatile sig_atomic_t *stop);

#endif
