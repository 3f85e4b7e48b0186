/* api/outbox_watch.h - the API's view of the outbox: back-pressure; its thread also paces
 * the idempotency-key expiry (api/key_expiry.h). The relay's wake-ups ride on the accept
 * batches' round trips (api/committer.c). */
#ifndef API_OUTBOX_WATCH_H
#define API_OUTBOX_WATCH_H

#include <stdbool.h>

#include "api/api_metrics.h"
#include "shared/lib/err.h"

typedef struct outbox_watch outbox_watch;

/*
 * outbox_watch_start - a thread with its own connection to @url that, every
 * second, refreshes the pending-row estimate (capped at @max_backlog + 1, so
 * it stays cheap). Each refresh is also a tick of the key expiry, on the same
 * connection. @m is borrowed.
 */
GW_MUSTCHECK gw_err outbox_watch_start(const char *url, long max_backlog, api_metrics *m,
                                       outbox_watch **out);
void outbox_watch_stop(outbox_watch *w); /* joins the thread; accepts NULL */

/* outbox_watch_over_limit - whether the last estimate was above the limit. */
bool outbox_watch_over_limit(const outbox_watch *w);

#endif
