/* worker/relay/confirm_clock.h - how long a batch may still wait for its confirms */
#ifndef WORKER_RELAY_CONFIRM_CLOCK_H
#define WORKER_RELAY_CONFIRM_CLOCK_H

#include <stdbool.h>

/*
 * A batch waits for its confirms while the broker shows it is alive: it is
 * given up (its unconfirmed rows stay pending, the connection is replaced)
 * after RELAY_CONFIRM_QUIET_MS in which the broker let us publish but sent no
 * confirm, after RELAY_BLOCKED_MAX_MS of one block (a memory or disk alarm:
 * connection.blocked), RELAY_STOP_WAIT_MS after a stop, and in any case
 * RELAY_BATCH_MAX_MS after its claim. A broker catching up after an alarm
 * confirms slowly but steadily: that is progress, not a timeout.
 */
#define RELAY_CONFIRM_QUIET_MS 5000  /* below the 10 s stop deadline */
#define RELAY_BLOCKED_MAX_MS   30000 /* below RELAY_BATCH_MAX_MS */
#define RELAY_STOP_WAIT_MS     5000  /* below the 10 s stop deadline */
#define RELAY_BATCH_MAX_MS                                                                         \
    45000 /* below the sessions' 60 s idle_in_transaction (shared/pg/db.h)                         \
           */

/* Monotonic milliseconds; 0 for "never" or "not now". */
typedef struct confirm_clock {
    long claimed;   /* the batch was claimed */
    long unblocked; /* the broker last lifted a block */
    long confirmed; /* the last ack or nack on the connection, for any batch */
    long blocked;   /* the current block began; 0: not blocked */
    long stopped;   /* the stop was first seen */
} confirm_clock;

/*
 * confirm_clock_left_ms - how long to wait for the next confirm at @now; <= 0:
 * give the batch up. While blocked, at most 200 ms (a stop must be seen).
 */
long confirm_clock_left_ms(const confirm_clock *c, long now);

#endif
