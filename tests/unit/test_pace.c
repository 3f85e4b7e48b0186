/* tests/unit/test_pace.c - a chore done in pieces between the real work */
#include <stdio.h>

#include "shared/lib/pace.h"
#include "tests/support/tcheck.h"

#define T0 5000000L

/* The first piece is due at once; one that finds nothing waits a period. */
static void test_due_and_period(void)
{
    pace p;

    pace_init(&p, 60000);
    CHECK(pace_begin(&p, T0));
    pace_end(&p, T0 + 3, false, true);
    CHECK(!pace_begin(&p, T0 + 59000));
    CHECK(pace_begin(&p, T0 + 3 + 60000));
}

/* While the real work flows, a piece of 70 ms is followed by 280 ms without one. */
static void test_busy_share(void)
{
    pace p;
    long chore = 0, now = T0;

    pace_init(&p, 60000);
    for (int i = 0; i < 20; i++) {
        while (!pace_begin(&p, now))
            now += 5; /* the real work, in 5 ms steps */
        now += 70;    /* the piece */
        chore += 70;
        pace_end(&p, now, true, true);
    }
    CHECK(!pace_begin(&p, now + 279));
    CHECK(pace_begin(&p, now + 280));
    now += 280; /* where the 21st piece may begin */
    printf("20 pieces of 70 ms in %ld ms: %.0f%% of the time\n", now - T0,
           100.0 * (double)chore / (double)(now - T0));
    CHECK(chore * PACE_SHARE <= now - T0);
}

/* Idle, the next piece follows at once; a piece that took no time still leaves a gap busy. */
static void test_idle_and_instant(void)
{
    pace p;

    pace_init(&p, 60000);
    CHECK(pace_begin(&p, T0));
    pace_end(&p, T0 + 50, true, false);
    CHECK(pace_begin(&p, T0 + 50));
    pace_end(&p, T0 + 50, true, true);
    CHECK(!pace_begin(&p, T0 + 50));
    CHECK(pace_begin(&p, T0 + 50 + PACE_SHARE - 1));
}

int main(void)
{
    test_due_and_period();
    test_busy_share();
    test_idle_and_instant();
    return tcheck_summary("pace");
}
