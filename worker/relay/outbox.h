/* worker/relay/outbox.h - the transactional outbox as the relay sees it */
#ifndef WORKER_RELAY_OUTBOX_H
#define WORKER_RELAY_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/lib/err.h"
#include "shared/pg/db.h"

/* What became of one claimed row after its publish. */
typedef enum outbox_fate {
    OUTBOX_UNSETTLED, /* no confirm (yet): stays pending */
    OUTBOX_CONFIRMED, /* acked and routed */
    OUTBOX_RETURNED,  /* basic.return: unroutable */
    OUTBOX_NACKED,    /* nacked or timed out: retried after a back-off */
} outbox_fate;

typedef struct outbox_row {
    int64_t id;
    const char *event_id; /* borrowed from the batch */
    const char *payment_id;
    const char *routing_key;
    const char *body;
    size_t body_len;
    const char *traceparent; /* NULL: none */
    int attempt;             /* x-attempt: 1, or the next one of a retry copy published again */
    uint64_t seq;            /* publisher-confirm delivery tag, 0: not published */
    bool settled;            /* its ack or nack arrived */
    outbox_fate fate;
    char why[160]; /* reply text of a return or a nack */
} outbox_row;

typedef struct outbox_batch outbox_batch;

/*
 * outbox_id_array - the ids of @rows whose fate is @fate as a PostgreSQL array
 * literal "{1,2,3}" (new string, free()): the marks update a whole fate in
 * one statement. NULL when none has it, or on OOM (then *@oom).
 */
char *outbox_id_array(const outbox_row *rows, size_t n, outbox_fate fate, bool *oom);

/* The statements a relay connection prepares. */
extern const db_stmt outbox_stmts[];
extern const size_t outbox_nstmts;

/*
 * outbox_begin_claim - open a transaction and lock up to @limit due pending
 * rows in id order (FOR UPDATE SKIP LOCKED: relays side by side take different
 * rows), in one round trip. On GW_OK *@out is a new batch owned by the caller
 * (outbox_batch_free()), possibly empty, and the transaction is open; on an
 * error the caller rolls back.
 */
GW_MUSTCHECK gw_err outbox_begin_claim(db_conn *db, int limit, outbox_batch **out);
void outbox_batch_free(outbox_batch *b); /* accepts NULL */

size_t outbox_batch_len(const outbox_batch *b);
outbox_row *outbox_batch_row(outbox_batch *b, size_t i); /* borrowed */

/*
 * outbox_mark_commit - write every row's fate in the claiming transaction and
 * commit it: confirmed rows published (payment accepted -> published),
 * returned rows unroutable (payment -> unroutable with the reply), nacked rows
 * pushed back with a back-off; unsettled rows are left as they are. The last
 * mark and the COMMIT go in one round trip (db_prepared_commit()). On an
 * error the caller rolls back.
 */
GW_MUSTCHECK gw_err outbox_mark_commit(db_conn *db, const outbox_batch *b);

/*
 * outbox_purge - delete the published rows older than @hours among the @limit rows above
 * *@after (an outbox id; 0 the first time), the count in *@deleted; *@after moves to where the
 * next call starts: every row below it is deleted or unroutable (purge_outbox(), sql/0019).
 */
GW_MUSTCHECK gw_err outbox_purge(db_conn *db, int hours, int limit, int64_t *after, long *deleted);

/*
 * outbox_rearm - rearm_lost_retries() (sql/0014): up to @limit payments
 * retrying for more than @after_s get their row pending again; *@rearmed.
 */
GW_MUSTCHECK gw_err outbox_rearm(db_conn *db, int after_s, int limit, long *rearmed);

/* outbox_backlog - pending rows and the age in seconds of the oldest. */
GW_MUSTCHECK gw_err outbox_backlog(db_conn *db, long *pending, double *oldest_age_s);

#endif
