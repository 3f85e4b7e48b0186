/* api/api_metrics.c - registration of the API's series */
#include "api/api_metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "shared/amqp/mq.h"

/* Designated, so a slot without a status stays 0: test_api_metrics catches it. */
static const int reject_statuses[API_NREJECT] = {
    [API_REJECT_400] = 400, [API_REJECT_401] = 401, [API_REJECT_404] = 404, [API_REJECT_405] = 405,
    [API_REJECT_409] = 409, [API_REJECT_413] = 413, [API_REJECT_415] = 415, [API_REJECT_422] = 422,
    [API_REJECT_500] = 500, [API_REJECT_503] = 503,
};

void api_metrics_init(api_metrics *m)
{
    char labels[32];

    m->registry = metrics_new();
    if (m->registry == NULL)
        abort();
    m->accepted = metrics_counter(m->registry, "paygw_api_accepted_total", NULL,
                                  "Payments committed and answered 202 for the first time.");
    m->replayed = metrics_counter(m->registry, "paygw_api_replayed_total", NULL,
                                  "Idempotent replays answered 202 with Idempotent-Replayed.");
    for (int i = 0; i < API_NREJECT; i++) {
        snprintf(labels, sizeof labels, "status=\"%d\"", reject_statuses[i]);
        m->rejected[i] = metrics_counter(m->registry, "paygw_api_rejected_total", labels,
                                         "Requests answered with an error, by status.");
    }
    m->backpressure =
        metrics_counter(m->registry, "paygw_api_backpressure_total", NULL,
                        "Accepts refused with 503 because the outbox backlog is high.");
    m->accept_seconds = metrics_histogram(m->registry, "paygw_api_accept_duration_seconds", NULL,
                                          "Time from a complete POST /v1/payments to its answer.",
                                          metrics_latency_bounds, metrics_latency_nbounds);
    m->outbox_backlog = metrics_gauge(m->registry, "paygw_outbox_backlog", NULL,
                                      "Unpublished outbox rows (refreshed every second, capped).");
    m->outbox_oldest_age = metrics_gauge(m->registry, "paygw_outbox_oldest_pending_age_seconds",
                                         NULL, "Age of the oldest unpublished outbox row.");
    m->notify_sent = metrics_counter(m->registry, "paygw_api_relay_wakeups_total", NULL,
                                     "Relay wake-ups committed after accept batches, one a batch.");
    m->commit_batch_size = metrics_histogram(m->registry, "paygw_api_commit_batch_size", NULL,
                                             "Accepts per group-commit transaction.",
                                             metrics_batch_bounds, metrics_batch_nbounds);
    mq_metrics_attach(m->registry); /* the admin's broker connection: its node, its reconnects */
}

void api_metrics_deinit(api_metrics *m)
{
    metrics_free(m->registry);
    m->registry = NULL;
}

void api_metrics_rejected(api_metrics *m, int status)
{
    for (int i = 0; i < API_NREJECT; i++) {
        if (reject_statuses[i] == status) {
            metrics_add(m->rejected[i], 1);
            return;
        }
    }
    metrics_add(m->rejected[API_REJECT_500], 1);
}
