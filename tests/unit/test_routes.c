/* tests/unit/test_routes.c - routes_match: every path of openapi/payments.yaml, and near misses */
#include <stdio.h>

#include "api/routes.h"
#include "tests/support/tcheck.h"

static void expect(const char *path, route want, const char *want_id)
{
    char id[24] = "";

    tcheck_context("%s", path);
    CHECK_INT(routes_match(path, id), want);
    if (want_id != NULL)
        CHECK_STR(id, want_id);
}

int main(void)
{
    char path[96];

    expect("/healthz", ROUTE_HEALTHZ, NULL);
    expect("/readyz", ROUTE_READYZ, NULL);
    expect("/metrics", ROUTE_METRICS, NULL);
    expect("/v1/payments", ROUTE_PAYMENTS, NULL);
    expect("/v1/payments/pay-1", ROUTE_PAYMENT, NULL);
    expect("/v1/payments/", ROUTE_V1_OTHER, NULL);    /* no id */
    expect("/v1/payments/a/b", ROUTE_V1_OTHER, NULL); /* one segment only */
    expect("/v1/paymentsx", ROUTE_V1_OTHER, NULL);
    expect("/v1", ROUTE_V1_OTHER, NULL);
    expect("/admin/dlq", ROUTE_DLQ_LIST, NULL);
    expect("/admin/dlq/drain", ROUTE_DLQ_DRAIN, NULL); /* fixed before {id} */
    expect("/admin/dlq/42", ROUTE_DLQ_ONE, "42");
    expect("/admin/dlq/42/replay", ROUTE_DLQ_REPLAY, "42");
    expect("/admin/dlq/42/other", ROUTE_ADMIN_OTHER, NULL);
    expect("/admin/dlq/", ROUTE_ADMIN_OTHER, NULL);
    expect("/admin/reconciliation", ROUTE_RECONCILE, NULL);
    expect("/admin", ROUTE_ADMIN_OTHER, NULL);
    expect("/admin/x", ROUTE_ADMIN_OTHER, NULL);
    expect("/", ROUTE_NONE, NULL);
    expect("/healthz/", ROUTE_NONE, NULL);
    expect("", ROUTE_NONE, NULL);
    /* the id holds 23 characters; 24 are another route */
    snprintf(path, sizeof path, "/admin/dlq/%s", "12345678901234567890123");
    expect(path, ROUTE_DLQ_ONE, "12345678901234567890123");
    snprintf(path, sizeof path, "/admin/dlq/%s/replay", "123456789012345678901234");
    expect(path, ROUTE_ADMIN_OTHER, NULL);
    tcheck_context_clear();
    return tcheck_summary("test_routes");
}
