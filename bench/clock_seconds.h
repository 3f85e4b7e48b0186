/* bench/clock_seconds.h - a clock as seconds in a double, for the bench tools' timings */
#ifndef BENCH_CLOCK_SECONDS_H
#define BENCH_CLOCK_SECONDS_H

#include <time.h>

static inline double clock_seconds(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
