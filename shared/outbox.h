/* shared/outbox.h - the outbox as payments-api and payments-relay agree on it: the wake-up
 * channel (the row states and the list of pending rows are sql/0001's and sql/0019's) */
#ifndef SHARED_OUTBOX_H
#define SHARED_OUTBOX_H

/* The channel the API NOTIFYs after its commits and payments-relay LISTENs on. */
#define OUTBOX_NOTIFY_CHANNEL "paygw_outbox"

#endif
