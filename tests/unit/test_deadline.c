/* tests/unit/test_deadline.c - absolute times for timed waits */
#include <stdio.h>

#include "shared/lib/deadline.h"
#include "tests/support/tcheck.h"

static void test_after_carries_into_seconds(void)
{
    struct timespec t = {.tv_sec = 10, .tv_nsec = 999999000L}, r;

    r = deadline_after(t, 2000L); /* 2 us past the end of the second */
    CHECK_INT(r.tv_sec, 11);
    CHECK_INT(r.tv_nsec, 1000L);
    r = deadline_after(t, 2500000000L); /* more than a second at once */
    CHECK_INT(r.tv_sec, 13);
    CHECK_INT(r.tv_nsec, 499999000L);
    r = deadline_after(t, 0);
    CHECK_INT(r.tv_sec, 10);
    CHECK_INT(r.tv_nsec, 999999000L);
}

static void test_passed(void)
{
    struct timespec a = {.tv_sec = 5, .tv_nsec = 100}, b = {.tv_sec = 5, .tv_nsec = 200};
    struct timespec c = {.tv_sec = 6, .tv_nsec = 0};

    CHECK(deadline_passed(&a, &b));  /* a is earlier than now = b */
    CHECK(!deadline_passed(&b, &a)); /* b is still ahead of now = a */
    CHECK(deadline_passed(&a, &a));  /* due exactly now */
    CHECK(deadline_passed(&b, &c));
    CHECK(!deadline_passed(&c, &b));
}

static void test_in_is_ahead_of_now(void)
{
    struct timespec now, d;

    clock_gettime(CLOCK_REALTIME, &now);
    d = deadline_in(50000000L); /* 50 ms */
    CHECK(!deadline_passed(&d, &now));
    CHECK(deadline_passed(&now, &d));
}

int main(void)
{
    TRUN(test_after_carries_into_seconds);
    TRUN(test_passed);
    TRUN(test_in_is_ahead_of_now);
    return tcheck_summary("deadline");
}
