/* shared/lib/backoff.c - "full jitter" on the upper half, so restarts do not stampede */
#include "shared/lib/backoff.h"

#include <time.h>

#include <sodium.h>

bool backoff_seed(void)
{
    return sodium_init() >= 0; /* 1 when already started: also fine */
}

void backoff_init(backoff *b, int initial_ms, int max_ms)
{
    b->initial_ms = initial_ms;
    b->max_ms = max_ms;
    b->current_ms = initial_ms;
}

void backoff_reset(backoff *b)
{
    b->current_ms = b->initial_ms;
}

void sleep_interruptible(int ms, volatile sig_atomic_t *stop)
{
    while (ms > 0 && !(stop && *stop)) {
        int step = ms < 100 ? ms : 100;
        struct timespec ts = {0, (long)step * 1000000L};

        nanosleep(&ts, NULL);
        ms -= step;
    }
}

void backoff_wait(backoff *b, volatile sig_atomic_t *stop)
{
    int half = b->current_ms / 2;
    int ms = half + (int)randombytes_uniform((uint32_t)(b->current_ms - half + 1));

    sleep_interruptible(ms, stop);
    b->current_ms = b->current_ms * 2 > b->max_ms ? b->max_ms : b->current_ms * 2;
}
