/* worker/inbox.h - the inbox and the payment's effects, as the worker writes them */
#ifndef WORKER_INBOX_H
#define WORKER_INBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "shared/db.h"
#include "shared/err.h"
#include "shared/payment.h"

typedef enum inbox_outcome {
    INBOX_SETTLED,   /* committed now: inbox row, ledger lines, payment settled */
    INBOX_DUPLICATE, /* the effect was committed before */
    INBOX_UNKNOWN,   /* no such payment for this event: nothing written */
    INBOX_TERMINAL,  /* the payment is dead-lettered: nothing written */
} inbox_outcome;

/* The statements a worker connection prepares. */
extern const db_stmt inbox_stmts[];
extern const size_t inbox_nstmts;

/* inbox_seen - whether @event_id's effect is already committed (a cheap pre-check). */
GW_MUSTCHECK gw_err inbox_seen(db_conn *db, const char *event_id, bool *seen);

/*
 * inbox_settle - one transaction: inbox insert (ON CONFLICT DO NOTHING), the
 * balanced ledger lines and the payment settled, then COMMIT. Anything but
 * INBOX_SETTLED rolls back. On INBOX_SETTLED *@accept_to_settle_s is the time
 * since the accept. Any error means nothing was committed: do not ack.
 */
GW_MUSTCHECK gw_err inbox_settle(db_conn *db, const payment *p, int attempt, inbox_outcome *out,
                                 double *accept_to_settle_s);

/* inbox_mark_retrying - payment retrying with @attempt and @why (forward-only guard). */
GW_MUSTCHECK gw_err inbox_mark_retrying(db_conn *db, const payment *p, int attempt,
                                        const char *why);

/* inbox_mark_dead - payment dead_lettered with @attempt and @why, unless settled. */
GW_MUSTCHECK gw_err inbox_mark_dead(db_conn *db, const char *payment_id, const char *event_id,
                                    int attempt, const char *why);

/*
 * inbox_purge - delete up to @limit inbox rows older than @days; the count in
 * *@deleted. After that an event is no longer recognised as a duplicate: the
 * admin refuses to replay dead letters older than the same window.
 */
GW_MUSTCHECK gw_err inbox_purge(db_conn *db, int days, int limit, long *deleted);

#endif
