/* shared/lib/backoff.h - capped exponential back-off with jitter, for reconnect loops */
#ifndef SHARED_LIB_BACKOFF_H
#define SHARED_LIB_BACKOFF_H

#include <signal.h>
#include <stdbool.h>

typedef struct backoff {
    int initial_ms;
    int max_ms;
    int current_ms;
} backoff;

/*
 * backoff_seed - start the jitter's random source (libsodium); false when it
 * cannot be used. Call once from main(), before any thread and any
 * backoff_wait(). The source is process-wide: token_random_hex() draws from it
 * too (the health server's request ids), so a program that calls this needs
 * no token_init().
 */
bool backoff_seed(void);

/* backoff_init - start at @initial_ms, double up to @max_ms. */
void backoff_init(backoff *b, int initial_ms, int max_ms);

/* backoff_reset - a success: the next failure waits @initial_ms again. */
void backoff_reset(backoff *b);

/*
 * backoff_wait - sleep a random time in [current/2, current], then double
 * current (capped). Returns early when *@stop becomes non-zero.
 */
void backoff_wait(backoff *b, volatile sig_atomic_t *stop);

/* sleep_interruptible - sleep @ms in small steps, returning early on *@stop. */
void sleep_interruptible(int ms, volatile sig_atomic_t *stop);

#endif
