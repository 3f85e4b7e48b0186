/*
 * shared/payment_status.h - the SQL of every C statement that moves a payment's status
 *
 * One owner decides every move: payment_may_move(from, to[, replay]) in
 * sql/0013, the contract's transition table. Each statement here has it in the
 * WHERE clause of its UPDATE of payments, so a move the table does not list
 * changes no row and the statement still succeeds (a late writer is a no-op,
 * never an error a program would retry). settle_payment() and settle_batch()
 * (sql/0013) do the same for 'settled'.
 *
 * The programs prepare these texts (worker/relay/outbox.c, worker/settle/inbox.c, api/admin/letters.c)
 * and tests/integration/test_payment_status.c runs the very same texts.
 */
#ifndef SHARED_PAYMENT_STATUS_H
#define SHARED_PAYMENT_STATUS_H

/*
 * Relay: accepted -> published. $1 bigint[]: the confirmed outbox ids.
 * A payment row the worker holds is being settled: "published" would be overwritten by
 * "settled" a moment later (and must never replace it), so the relay skips the row
 * rather than wait for the worker's commit with its whole batch unmarked. The rows it
 * does lock, it locks in byte order of payment_id, the order the worker's batches use.
 */
#define PAYMENT_STATUS_SQL_PUBLISHED                                                               \
    "WITH o AS (UPDATE outbox SET state = 'published', published_at = now() "                      \
    "WHERE id = ANY($1::bigint[]) AND state = 'pending' RETURNING payment_id), "                   \
    "l AS (SELECT p.payment_id FROM payments p JOIN o USING (payment_id) "                         \
    "WHERE payment_may_move(p.status, 'published') ORDER BY p.payment_id COLLATE \"C\" "           \
    "FOR UPDATE OF p SKIP LOCKED) "                                                                \
    "UPDATE payments p SET status = 'published', updated_at = now() FROM l "                       \
    "WHERE p.payment_id = l.payment_id AND payment_may_move(p.status, 'published')"

/* Relay: accepted -> unroutable (the broker returned it). $1 outbox id, $2 the reason. */
#define PAYMENT_STATUS_SQL_UNROUTABLE                                                              \
    "WITH o AS (UPDATE outbox SET state = 'unroutable', published_at = now(), last_error = $2 "    \
    "WHERE id = $1::bigint AND state = 'pending' RETURNING payment_id) "                           \
    "UPDATE payments p SET status = 'unroutable', last_error = $2, updated_at = now() FROM o "     \
    "WHERE p.payment_id = o.payment_id AND payment_may_move(p.status, 'unroutable')"

/*
 * Worker: -> retrying. $1 payment_id, $2 event_id, $3 attempt, $4 the error. The wait is noted
 * in retry_waits, so the relay can publish the payment again if its copy is lost (sql/0014).
 */
#define PAYMENT_STATUS_SQL_RETRYING                                                                \
    "WITH moved AS (UPDATE payments SET status = 'retrying', attempts = $3::int, "                 \
    "last_error = $4, updated_at = now() WHERE payment_id = $1 AND event_id = $2 "                 \
    "AND payment_may_move(status, 'retrying') RETURNING payment_id) "                              \
    "INSERT INTO retry_waits (payment_id) SELECT payment_id FROM moved "                           \
    "ON CONFLICT (payment_id) DO UPDATE SET since = now()"

/* Worker: -> dead_lettered. $1 payment_id, $2 event_id, $3 attempt, $4 the error. */
#define PAYMENT_STATUS_SQL_DEAD_LETTERED                                                           \
    "UPDATE payments SET status = 'dead_lettered', attempts = greatest(attempts, $3::int), "       \
    "last_error = $4, updated_at = now() WHERE payment_id = $1 AND event_id = $2 "                 \
    "AND payment_may_move(status, 'dead_lettered')"

/*
 * Admin replay: dead_lettered -> published, the one backward step, and the dead
 * letter's replayed mark. $1 dead letter id, $2 who, $3 event_id.
 */
#define PAYMENT_STATUS_SQL_REPLAYED                                                                \
    "WITH l AS (UPDATE dead_letters SET replayed_at = now(), replayed_by = $2 "                    \
    "WHERE id = $1::bigint) "                                                                      \
    "UPDATE payments SET status = 'published', updated_at = now() "                                \
    "WHERE event_id = $3 AND payment_may_move(status, 'published', true)"

#endif
