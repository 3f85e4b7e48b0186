/* api/key_expiry.h - the idempotency-key expiry: the purge of records past their expires_at
 * (7 days after the accept), and its pace of once a minute */
#ifndef API_KEY_EXPIRY_H
#define API_KEY_EXPIRY_H

#include "shared/pg/db.h"

/* Once a minute is plenty for a 7-day window: every KEY_EXPIRY_TICKS-th tick, a tick a second. */
#define KEY_EXPIRY_TICKS 60

/* The pace; a small value type embedded in its owner. Zeroed is ready. */
typedef struct key_expiry {
    unsigned long ticks;
} key_expiry;

/* The purge statement: prepare it on the connection given to key_expiry_tick(). */
extern const db_stmt key_expiry_stmt;

/*
 * key_expiry_tick - call once a second with a usable connection (@db borrowed, the
 * statement above prepared on it). Every KEY_EXPIRY_TICKS-th call deletes up to 1000
 * expired records and logs idempotency_keys_expired when it removed any.
 */
void key_expiry_tick(key_expiry *k, db_conn *db);

#endif
