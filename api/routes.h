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

/* routes_early - http_early_fn: authentication, routing and header checks. */
bool routes_early(void *app, http_request *r);

/* routes_handle - http_handler_fn: the complete request to its handler. */
void routes_handle(void *app, http_request *r);

#endif
