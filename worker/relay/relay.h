/* worker/relay/relay.h - payments-relay: outbox rows to RabbitMQ under publisher confirms */
#ifndef WORKER_RELAY_RELAY_H
#define WORKER_RELAY_RELAY_H

#include <signal.h>

#include "shared/config.h"
#include "shared/http/health.h"
#include "shared/lib/err.h"
#include "shared/lib/metrics.h"

#define RELAY_BATCH_SIZE         1024
#define RELAY_POLL_MS            1000 /* polling fallback when no NOTIFY comes */
/* how long a batch waits for its confirms: worker/relay/confirm_clock.h */

typedef struct relay relay;

/*
 * relay_new - a relay for @cfg (borrowed) that registers its series in
 * @registry (borrowed) and reports readiness to @h (borrowed, may be NULL).
 * Register before the metrics server starts: registration is not thread-safe.
 * Connections are opened by relay_run(). Owned by the caller (relay_free()).
 */
GW_MUSTCHECK gw_err relay_new(const gw_config *cfg, metrics *registry, health *h, relay **out);
void relay_free(relay *r); /* accepts NULL */

/* relay_set_health - where to report readiness from now on (borrowed, may be NULL). */
void relay_set_health(relay *r, health *h);

/*
 * relay_run - claim, publish, confirm and mark batches until *@stop; reconnect
 * to either server with capped back-off. The batch in flight when *@stop is
 * set is finished (confirms, marks, COMMIT) before it returns, within
 * RELAY_STOP_WAIT_MS: the unconfirmed rows stay pending.
 */
void relay_run(relay *r, volatile sig_atomic_t *stop);

#endif
