/* shared/lib/deadline.h - absolute CLOCK_REALTIME times for pthread_cond_timedwait() */
#ifndef SHARED_LIB_DEADLINE_H
#define SHARED_LIB_DEADLINE_H

#include <stdbool.h>
#include <time.h>

/* deadline_after - @t plus @ns nanoseconds (ns >= 0), normalised. */
struct timespec deadline_after(struct timespec t, long ns);

/* deadline_in - now (CLOCK_REALTIME, the clock of a default condition variable) plus @ns. */
struct timespec deadline_in(long ns);

/* deadline_passed - @t is not later than @now. */
bool deadline_passed(const struct timespec *t, const struct timespec *now);

#endif
