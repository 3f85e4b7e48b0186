/* api/routes.h - which handler answers which method and path, and who may call it */
#ifndef API_ROUTES_H
#define API_ROUTES_H

#include <stdbool.h>

#include "api/admin/dlq.h"
#include "api/admin/reconciler.h"
#include "api/console/replay_jobs.h"
#include "api/console/session.h"
#include "api/payments.h"
#include "shared/config.h"
#include "shared/http/http.h"

/* Everything the API's handlers share; borrowed from main(). */
typedef struct api_app {
    const gw_config *cfg;
    payments_deps payments;
    dlq *dlq;
    sessions *sessions; /* the console's logins */
    replay_jobs *jobs;
    reconciler *reconciler; /* GET /admin/reconciliation */
} api_app;

typedef enum route {
    ROUTE_NONE,
    ROUTE_HEALTHZ,
    ROUTE_READYZ,
    ROUTE_METRICS,
    ROUTE_PAYMENTS,    /* /v1/payments */
    ROUTE_PAYMENT,     /* /v1/payments/{payment_id} */
    ROUTE_DLQ_DRAIN,   /* /admin/dlq/drain */
    ROUTE_DLQ_LIST,    /* /admin/dlq */
    ROUTE_DLQ_ONE,     /* /admin/dlq/{id} */
    ROUTE_DLQ_REPLAY,  /* /admin/dlq/{id}/replay */
    ROUTE_RECONCILE,   /* /admin/reconciliation */
    ROUTE_DLQ_GROUPS,  /* /admin/dlq/groups */
    ROUTE_OVERVIEW,    /* /admin/overview */
    ROUTE_SESSION,     /* /admin/session: GET, POST (log in), DELETE (log out) */
    ROUTE_REPLAYS,     /* /admin/replays: GET, POST */
    ROUTE_REPLAY_JOB,  /* /admin/replays/{id} */
    ROUTE_UI,          /* /admin/ui/{file}: the console's files, no credential */
    ROUTE_UI_ROOT,     /* /admin/ui: redirected to /admin/ui/ */
    ROUTE_ADMIN_OTHER, /* /admin/... anything else */
    ROUTE_V1_OTHER,
} route;

/*
 * routes_match - the route of @path (the path alone, no query). For
 * ROUTE_DLQ_ONE and ROUTE_DLQ_REPLAY the letter's id goes into @id, for
 * ROUTE_REPLAY_JOB the job's (24 bytes; a longer id is ROUTE_ADMIN_OTHER).
 */
route routes_match(const char *path, char *id);

/* routes_early - http_early_fn: authentication, routing and header checks. */
bool routes_early(void *app, http_request *r);

/* routes_handle - http_handler_fn: the complete request to its handler. */
void routes_handle(void *app, http_request *r);

#endif
