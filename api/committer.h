/* api/committer.h - group commit: accepts that arrive together share one transaction */
#ifndef API_COMMITTER_H
#define API_COMMITTER_H

#include <stddef.h>

#include "shared/lib/err.h"
#include "shared/lib/metrics.h"
#include "shared/payment.h"

/* The answer accept_payment() (sql/0001) gave one request. */
typedef enum accept_outcome {
    OUTCOME_ACCEPTED,
    OUTCOME_REPLAY,
    OUTCOME_KEY_REUSED,
    OUTCOME_IN_FLIGHT,
    OUTCOME_PAYMENT_DECIDED,
} accept_outcome;

/*
 * One accept handed to the committer. The submitter fills the inputs and
 * @done; the committer fills the outputs and then calls @done(@arg) from its
 * own thread. The job belongs to the submitter throughout.
 */
typedef struct accept_job {
    payment p;
    char *canon;             /* borrowed: the canonical JSON, also the outbox body */
    const char *traceparent; /* borrowed, NULL: none */
    char response[256];      /* the 202 body to store for replays */
    gw_err err;              /* GW_OK: committed (or nothing to write); else nothing committed */
                             /* GW_ERR_CONFLICT: alone, it broke a unique key (never transient) */
    accept_outcome outcome;
    char answer[256]; /* the 202 body to send */
    void (*done)(void *arg);
    void *arg;
    struct accept_job *next; /* the committer's queue */
} accept_job;

typedef struct committer committer;

/*
 * committer_start - @threads threads (1..CONFIG_MAX_COMMIT_THREADS, else
 * GW_ERR_INVALID), each with its own connection to @url,
 * each taking up to @max_batch queued jobs into one transaction
 * (accept_batch(), sql/0011); each batch's size goes to @batch_size, a
 * histogram (borrowed). Each batch's round trip carries the relay's wake-up
 * after its COMMIT; @wakeups (a counter, borrowed) counts those that
 * committed. Owned by the caller (committer_stop()).
 */
GW_MUSTCHECK gw_err committer_start(const char *url, int threads, int max_batch, metric *batch_size,
                                    metric *wakeups, committer **out);

/* committer_stop - finish every queued job, then stop and free. Accepts NULL. */
void committer_stop(committer *c);

/* committer_submit - queue @job (borrowed until its done() call). */
void committer_submit(committer *c, accept_job *job);

#endif
