/* api/api_metrics.h - the series payments-api exports on /metrics */
#ifndef API_API_METRICS_H
#define API_API_METRICS_H

#include "shared/lib/metrics.h"

/*
 * The statuses that get their own rejected-by-status series, one slot each. Any
 * other status is counted as API_REJECT_500. To add one, add its slot here and
 * its status in reject_statuses[] (api/api_metrics.c).
 */
enum api_reject {
    API_REJECT_400,
    API_REJECT_401,
    API_REJECT_404,
    API_REJECT_405,
    API_REJECT_409,
    API_REJECT_413,
    API_REJECT_415,
    API_REJECT_422,
    API_REJECT_500,
    API_REJECT_503,
    API_NREJECT
};

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
