/* tests/unit/test_metrics.c - the Prometheus text format of shared/metrics */
#include <stdlib.h>
#include <string.h>

#include "shared/lib/metrics.h"
#include "tests/support/tcheck.h"

static int count(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_render(void)
{
    static const double bounds[] = {0.1, 1};
    metrics *m = metrics_new();
    metric *ok, *bad400, *bad422, *gauge, *hist, *other;
    size_t len = 0;
    char *text;

    ok = metrics_counter(m, "t_accepted_total", NULL, "Accepted.");
    bad400 = metrics_counter(m, "t_rejected_total", "status=\"400\"", "Rejected by status.");
    gauge = metrics_gauge(m, "t_backlog", NULL, "Backlog.");
    bad422 = metrics_counter(m, "t_rejected_total", "status=\"422\"", "Rejected by status.");
    hist = metrics_histogram(m, "t_seconds", NULL, "Latency.", bounds, 2);
    other = metrics_counter(m, "t_other_total", NULL, "Never incremented.");
    (void)other;

    metrics_add(ok, 3);
    metrics_add(bad400, 1);
    metrics_add(bad422, 2);
    metrics_add(bad422, 5);
    metrics_set(gauge, 2.5);
    metrics_observe(hist, 0.05);
    metrics_observe(hist, 0.1); /* on a bound: that bucket (le is inclusive) */
    metrics_observe(hist, 0.5);
    metrics_observe(hist, 5);
    CHECK_INT(metrics_value(ok), 3);
    CHECK_INT(metrics_value(bad422), 7);

    text = metrics_render(m, &len);
    if (!CHECK(text != NULL)) {
        metrics_free(m);
        return;
    }
    CHECK_INT(len, strlen(text));
    CHECK_CONTAINS(text, "# HELP t_accepted_total Accepted.\n# TYPE t_accepted_total counter\n"
                         "t_accepted_total 3\n");
    /* one HELP and TYPE per family, its series together even when registered apart */
    CHECK_INT(count(text, "# HELP t_rejected_total "), 1);
    CHECK_INT(count(text, "# TYPE t_rejected_total counter"), 1);
    CHECK_CONTAINS(text, "# TYPE t_rejected_total counter\n"
                         "t_rejected_total{status=\"400\"} 1\n"
                         "t_rejected_total{status=\"422\"} 7\n");
    CHECK_CONTAINS(text, "# TYPE t_backlog gauge\nt_backlog 2.5\n");
    CHECK_CONTAINS(text, "# TYPE t_seconds histogram\n"
                         "t_seconds_bucket{le=\"0.1\"} 2\n"
                         "t_seconds_bucket{le=\"1\"} 3\n"
                         "t_seconds_bucket{le=\"+Inf\"} 4\n"
                         "t_seconds_sum 5.65\n"
                         "t_seconds_count 4\n");
    CHECK_CONTAINS(text, "t_other_total 0\n"); /* a zero is still exported */
    CHECK_INT(count(text, "# HELP "), 5);
    CHECK_INT(count(text, "# TYPE "), 5);
    CHECK(len > 0 && text[len - 1] == '\n');
    free(text);
    metrics_free(m);
}

static void test_labelled_histogram(void)
{
    static const double bounds[] = {1};
    metrics *m = metrics_new();
    metric *h = metrics_histogram(m, "t_h", "route=\"a\"", "H.", bounds, 1);
    size_t len;
    char *text;

    metrics_observe(h, 2);
    text = metrics_render(m, &len);
    CHECK_CONTAINS(text, "t_h_bucket{route=\"a\",le=\"1\"} 0\n"
                         "t_h_bucket{route=\"a\",le=\"+Inf\"} 1\n"
                         "t_h_sum{route=\"a\"} 2\n"
                         "t_h_count{route=\"a\"} 1\n");
    free(text);
    metrics_free(m);
    metrics_free(NULL); /* accepts NULL */
}

static void test_latency_bounds(void)
{
    CHECK(metrics_latency_nbounds > 0 && metrics_latency_nbounds <= 16);
    for (size_t i = 1; i < metrics_latency_nbounds; i++)
        CHECK(metrics_latency_bounds[i] > metrics_latency_bounds[i - 1]);
}

int main(void)
{
    TRUN(test_render);
    TRUN(test_labelled_histogram);
    TRUN(test_latency_bounds);
    return tcheck_summary("test_metrics");
}
