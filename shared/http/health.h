/* shared/http/health.h - /healthz, /readyz and /metrics for the relay and the worker */
#ifndef SHARED_HTTP_HEALTH_H
#define SHARED_HTTP_HEALTH_H

#include <stdatomic.h>
#include <stdbool.h>

#include "shared/config.h"
#include "shared/lib/metrics.h"

typedef struct health health;

/*
 * health_start - serve on @listen (not set: serve nothing and return GW_OK
 * with *@out NULL). @registry is borrowed; the gauges paygw_database_ready and
 * paygw_broker_ready are registered in it before the server starts. Ready
 * means both flags are true; the program's loop sets them with health_set_*,
 * and the gauges follow them (1 or 0).
 */
GW_MUSTCHECK gw_err health_start(const listen_addr *listen, metrics *registry, health **out);
void health_stop(health *h); /* accepts NULL */

/* Safe from any thread; accept NULL @h. */
void health_set_db(health *h, bool up);
void health_set_mq(health *h, bool up);

#endif
