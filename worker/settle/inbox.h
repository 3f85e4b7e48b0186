/* worker/settle/inbox.h - the inbox and the payment's effects, as the worker writes them */
#ifndef WORKER_SETTLE_INBOX_H
#define WORKER_SETTLE_INBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "shared/lib/err.h"
#include "shared/payment.h"
#include "shared/pg/db.h"

typedef enum inbox_outcome {
    INBOX_SETTLED,   /* committed now: inbox row, ledger lines, payment settled */
    INBOX_DUPLICATE, /* the effect was committed before */
    INBOX_UNKNOWN,   /* no such payment for this event: nothing written */
    INBOX_TERMINAL,  /* the payment is dead-lettered: nothing written */
} inbox_outcome;

/* The statements a worker connection prepares. */
extern const db_stmt inbox_stmts[];
extern const size_t inbox_nstmts;

/* One delivery of a batch: inputs @p and @attempt; outputs the rest. */
typedef struct inbox_item {
    const payment *p; /* borrowed */
    int attempt;
    const char *bank_reference; /* borrowed; NULL or "": none (the built-in simulation) */
    bool failed;           /* its own subtransaction failed: nothing of it was written */
    inbox_outcome outcome; /* when not failed */
    double accept_to_settle_s;
} inbox_item;

/*
 * inbox_seen_many - @seen[i] tells whether @items[i]'s effect is already
 * committed; one round trip for the whole batch.
 */
GW_MUSTCHECK gw_err inbox_seen_many(db_conn *db, const inbox_item *items, int n, bool *seen);

/*
 * inbox_settle_batch - one transaction for @n items in payment_id order
 * (settle_batch() in sql/0009: settle_payment() per item), then one COMMIT. On
 * GW_OK each item's outcome is filled, or failed is set for an item whose own
 * run failed (when the batch fails on an unexpected error while the connection
 * holds, each item is run again alone). Any other result means nothing was
 * committed: ack none of it.
 */
GW_MUSTCHECK gw_err inbox_settle_batch(db_conn *db, inbox_item *items, int n);

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
