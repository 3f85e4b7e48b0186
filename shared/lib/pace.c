/* shared/lib/pace.c - a chore done in pieces between the real work */
#include "shared/lib/pace.h"

#include <time.h>

void pace_init(pace *p, long period_ms)
{
    *p = (pace){.period_ms = period_ms};
}

bool pace_begin(pace *p, long now)
{
    if (now < p->next_ms)
        return false;
    p->started_ms = now;
    return true;
}

void pace_end(pace *p, long now, bool more, bool busy)
{
    long took = now - p->started_ms;

    if (!more)
        p->next_ms = now + p->period_ms;
    else if (busy)
        p->next_ms = now + (took > 0 ? took : 1) * (PACE_SHARE - 1);
    else
        p->next_ms = now;
}

long pace_now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
