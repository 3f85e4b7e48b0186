/* shared/lib/deadline.c - absolute times for timed waits */
#include "shared/lib/deadline.h"

#define NS_PER_S 1000000000L

struct timespec deadline_after(struct timespec t, long ns)
{
    t.tv_sec += ns / NS_PER_S;
    t.tv_nsec += ns % NS_PER_S;
    if (t.tv_nsec >= NS_PER_S) {
        t.tv_nsec -= NS_PER_S;
        t.tv_sec++;
    }
    return t;
}

struct timespec deadline_in(long ns)
{
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    return deadline_after(now, ns);
}

bool deadline_passed(const struct timespec *t, const struct timespec *now)
{
    return t->tv_sec < now->tv_sec || (t->tv_sec == now->tv_sec && t->tv_nsec <= now->tv_nsec);
}
