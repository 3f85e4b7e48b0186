/* worker/settle/settle.h - payments-worker's loop: each batch validated, sent to the bank, settled
 * in one COMMIT (events "processed" and "committed"), then answered through consumer.h */
#ifndef WORKER_SETTLE_SETTLE_H
#define WORKER_SETTLE_SETTLE_H

#include <signal.h>

#include "shared/config.h"
#include "shared/http/health.h"
#include "shared/lib/err.h"
#include "shared/lib/metrics.h"
#include "worker/settle/bank.h"

/* deliveries applied in one transaction; a batch is also at most half the prefetch */
#define SETTLE_BATCH_MAX 256

typedef struct settle settle;

/*
 * settle_new - the worker for @cfg, settling through @b (both borrowed),
 * registering its series in @registry (before the metrics server starts).
 * Owned by the caller (settle_free()).
 */
GW_MUSTCHECK gw_err settle_new(const gw_config *cfg, const bank *b, metrics *registry,
                               settle **out);
void settle_free(settle *s); /* accepts NULL */

/* settle_set_health - where to report readiness (borrowed, may be NULL). */
void settle_set_health(settle *s, health *h);

/*
 * settle_run - consume payments.settlement until *@stop; reconnect with
 * capped back-off. On stop the consumer is cancelled and the batch in hand is
 * finished (COMMIT, then ack) before it returns; unacked prefetched
 * deliveries go back to the queue when the channel closes.
 */
void settle_run(settle *s, volatile sig_atomic_t *stop);

#endif
