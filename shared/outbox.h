/* shared/outbox.h - the outbox as payments-api and payments-relay agree on it: the wake-up
 * channel and the row states (sql/0001 checks the same three) */
#ifndef SHARED_OUTBOX_H
#define SHARED_OUTBOX_H

/* The channel the API NOTIFYs after its commits and payments-relay LISTENs on. */
#define OUTBOX_NOTIFY_CHANNEL "paygw_outbox"

/* outbox.state, as SQL literals are spelled: one row moves from pending to one of the others. */
#define OUTBOX_STATE_PENDING    "pending"
#define OUTBOX_STATE_PUBLISHED  "published"
#define OUTBOX_STATE_UNROUTABLE "unroutable"

#endif
