/* api/routes.h - which handler answers which method and path, and who may call it */
#ifndef API_ROUTES_H
#define API_ROUTES_H

#include <stdbool.h>

#include "api/admin/dlq.h"
#include "api/payments.h"
#include "shared/config.h"
#include "shared/http/http.h"

/* Everything the API's handlers share; borrowed from main(). */
typedef struct api_app {
    const gw_config *cfg;
    payments_deps payments;
    dlq *dlq;
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
    ROUTE_ADMIN_OTHER, /* /admin/... anything else */
    ROUTE_V1_OTHER,
} route;

/*
 * routes_match - the route of @path (the path alone, no query). For
 * ROUTE_DLQ_ONE and ROUTE_DLQ_REPLAY the letter's id goes into @id (24 bytes;
 * a longer id is ROUTE_ADMIN_OTHER).
 */
route routes_match(const char *path, char *id);

/* routes_early - http_early_fn: authentication, routing and header checks. */
bool routes_early(void *app, http_request *r);

/* routes_handle - http_handler_fn: the complete request to its handler. */
void routes_handle(void *app, http_request *r);

#endif
