/* worker/relay/wakeup.h - the API's NOTIFYs on a connection of their own */
#ifndef WORKER_RELAY_WAKEUP_H
#define WORKER_RELAY_WAKEUP_H

#include <stdbool.h>

#include "shared/lib/err.h"
#include "shared/pg/db.h"

/*
 * A session that only LISTENs. The lanes' sessions spend their time inside
 * batch transactions, and PostgreSQL holds a notification back from a session
 * until its transaction ends: on a session of its own, a NOTIFY reaches the
 * relay while a batch waits for its confirms, so the idle lane can claim the
 * new rows at once instead of after that batch.
 */
typedef struct relay_wakeup relay_wakeup;

/*
 * relay_wakeup_open - connect, prepare @stmts (borrowed) and LISTEN on the
 * outbox channel. The session is never inside a batch, so the relay's
 * housekeeping runs on it too, whether the lanes are busy or not.
 */
GW_MUSTCHECK gw_err relay_wakeup_open(const char *url, const db_stmt *stmts, size_t n,
                                      relay_wakeup **out);
void relay_wakeup_close(relay_wakeup *w); /* accepts NULL */

/* relay_wakeup_db - the session, borrowed: a statement run on it may read notifications
 * into libpq's buffer, where poll() cannot see them (relay_wakeup_take() finds them). */
db_conn *relay_wakeup_db(relay_wakeup *w);

/* relay_wakeup_fd - the socket to poll() for POLLIN. */
int relay_wakeup_fd(relay_wakeup *w);

/*
 * relay_wakeup_take - read what arrived and consume every notification;
 * *@woken when at least one came (one wake-up stands for any number).
 * GW_ERR_DB when the session is gone (reopen it, and claim anyway: a
 * notification may have been lost with it).
 */
GW_MUSTCHECK gw_err relay_wakeup_take(relay_wakeup *w, bool *woken);

#endif
