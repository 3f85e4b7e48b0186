/* shared/lib/pace.h - a chore done in pieces between the real work */
#ifndef SHARED_LIB_PACE_H
#define SHARED_LIB_PACE_H

#include <stdbool.h>

/*
 * A purge that works through a backlog runs on the thread that does the real
 * work (settling, publishing), so each piece delays what waits behind it.
 * While that work flows, the next piece starts PACE_SHARE - 1 times the last
 * one's duration later: the chore takes at most 1/PACE_SHARE of the time. When
 * idle, the next piece starts at once; after a piece that found nothing (or
 * failed), one period later. Times are monotonic milliseconds (pace_now_ms()).
 */
#define PACE_SHARE 5

typedef struct pace {
    long period_ms;
    long next_ms;    /* the next piece is due; 0: now */
    long started_ms; /* the piece under way began */
} pace;

void pace_init(pace *p, long period_ms);

/* pace_begin - whether a piece is due at @now; if so, it begins now. */
bool pace_begin(pace *p, long now);

/* pace_end - the piece ended at @now; @more: it found work, more may be left. */
void pace_end(pace *p, long now, bool more, bool busy);

long pace_now_ms(void);

#endif
