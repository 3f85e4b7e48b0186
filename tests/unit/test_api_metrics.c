/* tests/unit/test_api_metrics.c - every rejected status has its series; others count as 500 */
#include <stdlib.h>

#include "api/api_metrics.h"
#include "tests/support/tcheck.h"

static void test_rejected_by_status(void)
{
    static const int listed[] = {400, 401, 404, 405, 409, 413, 415, 422, 500, 503};
    api_metrics m;

    api_metrics_init(&m);
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++) {
        api_metrics_rejected(&m, listed[i]);
        tcheck_context("status %d", listed[i]);
        /* the slot of the status, and only it, moved */
        int moved = 0;
        for (int s = 0; s < API_NREJECT; s++)
            moved += (int)metrics_value(m.rejected[s]);
        CHECK_INT(moved, (long long)i + 1);
    }
    tcheck_context_clear();
    for (int s = 0; s < API_NREJECT; s++)
        CHECK_INT(metrics_value(m.rejected[s]), 1);
    /* a status without a series of its own is a 500 */
    api_metrics_rejected(&m, 418);
    api_metrics_rejected(&m, 502);
    CHECK_INT(metrics_value(m.rejected[API_REJECT_500]), 3);
    CHECK_INT(metrics_value(m.rejected[API_REJECT_503]), 1);

    size_t len;
    char *text = metrics_render(m.registry, &len);
    CHECK_CONTAINS(text, "paygw_api_rejected_total{status=\"500\"} 3");
    CHECK_CONTAINS(text, "paygw_api_rejected_total{status=\"422\"} 1");
    CHECK_NOT_CONTAINS(text, "status=\"0\""); /* every slot has its status */
    free(text);
    api_metrics_deinit(&m);
}

int main(void)
{
    TRUN(test_rejected_by_status);
    return tcheck_summary("test_api_metrics");
}
