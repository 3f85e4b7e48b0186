/* api/admin/replay.h - the replay publisher: a stored letter sent to payments.events again as
 * a fresh start (x-attempt 1), mandatory and confirmed */
#ifndef API_ADMIN_REPLAY_H
#define API_ADMIN_REPLAY_H

#include <stddef.h>

#include "api/admin/dlq_broker.h"
#include "api/admin/letters.h"

/*
 * replay_publish - publish the letter @l (borrowed, locked by the caller's transaction)
 * with its original body, routing key, message id and traceparent, and a
 * paygw-replay-of header naming the letter @id; takes @b's lock for the call.
 * GW_OK once confirmed; GW_ERR_NOT_FOUND when the broker returned it unroutable (the
 * reason into @why); anything else: not accepted.
 */
GW_MUSTCHECK gw_err replay_publish(dlq_broker *b, const letters_locked *l, const char *id,
                                   char *why, size_t len);

/*
 * replay_publish_many - replay_publish() of the @n letters @ls (named @ids), all confirmed in
 * one round trip; GW_OK when every confirm came, each letter's outcome in @each.
 */
GW_MUSTCHECK gw_err replay_publish_many(dlq_broker *b, const letters_locked *ls,
                                        const char *const *ids, size_t n, gw_err *each);

#endif
