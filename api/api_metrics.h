/* api/api_metrics.h - the series payments-api exports on /metrics */
#ifndef API_API_METRICS_H
#define API_API_METRICS_H

#include "shared/lib/metrics.h"

/* Statuses that get their own rejected-by-status series. */
#define API_REJECT_STATUSES                                                                        \
    {                                                                                              \
        400, 401, 404, 405, 409, 413, 415, 422, 500, 503                                           \
    }
#define API_NREJECT 10

typedef struct api_metrics {
    metrics *registry; /* owned */
    metric *accepted;  /* 202 after a new commit */
    metric *replayed;  /* 202 replays of an earlier commit */
    metric *rejected[API_NREJECT];
    metric *backpressure; /* 503s because of the outbox backlog */
    metric *accept_seconds;
    metric *outbox_backlog;
    metric *outbox_oldest_age;
    metric *notify_sent;
    metric *commit_batch_size;
} api_metrics;

/* api_metrics_init - register every series; abort()s on OOM at start-up. */
void api_metrics_init(api_metrics *m);
void api_metrics_deinit(api_metrics *m);

/* api_metrics_rejected - count one error answer with @status (others go to 500). */
void api_metrics_rejected(api_metrics *m, int status);

#endif
