/* api/admin/reconciler.h - GET /admin/reconciliation, answered from a thread of its own */
#ifndef API_ADMIN_RECONCILER_H
#define API_ADMIN_RECONCILER_H

#include "api/api_metrics.h"
#include "shared/config.h"
#include "shared/http/http.h"
#include "shared/lib/err.h"

/*
 * A report reads every payment once for the totals (a second per two million)
 * and a full one (?full=true) every ledger line too (most of a minute). It runs
 * on one thread with its own PostgreSQL connection while the request waits
 * suspended, so no HTTP thread and no pooled connection waits on it. Requests
 * that arrive while a report runs are answered together by the next one, read
 * after all of them arrived.
 */
typedef struct reconciler reconciler;

GW_MUSTCHECK gw_err reconciler_start(const gw_config *cfg, api_metrics *m, reconciler **out);

/*
 * reconciler_stop - cancel the report running, answer the waiting requests 503
 * and end the thread; before the HTTP server stops, which must still be there
 * to answer them. Accepts NULL.
 */
void reconciler_stop(reconciler *rc);

/* reconciler_request - GET /admin/reconciliation[?full=true]; runs twice (suspend, answer). */
void reconciler_request(reconciler *rc, http_request *r);

#endif
