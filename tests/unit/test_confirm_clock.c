/* tests/unit/test_confirm_clock.c - when a batch waiting for its confirms is given up */
#include <stdio.h>

#include "tests/support/tcheck.h"
#include "worker/relay/confirm_clock.h"

#define T0 1000000L /* a monotonic clock well past its start */

/* A broker that stays silent after the claim: given up RELAY_CONFIRM_QUIET_MS later. */
static void test_silence_after_the_claim(void)
{
    confirm_clock c = {.claimed = T0};

    CHECK_INT(confirm_clock_left_ms(&c, T0), RELAY_CONFIRM_QUIET_MS);
    CHECK_INT(confirm_clock_left_ms(&c, T0 + 4000), RELAY_CONFIRM_QUIET_MS - 4000);
    CHECK(confirm_clock_left_ms(&c, T0 + RELAY_CONFIRM_QUIET_MS) <= 0);
}

/*
 * After an alarm the broker confirms what it had taken slowly (seen in
 * e2e/relay_alarm: a batch's last confirm 5.0-5.1 s after the unblock, and a
 * reconnect). Each confirm shows the broker alive: the quiet time starts again.
 */
static void test_slow_confirms_after_an_unblock(void)
{
    confirm_clock c = {.claimed = T0, .blocked = T0 + 100};

    CHECK_INT(confirm_clock_left_ms(&c, T0 + 8000), 200); /* blocked 7.9 s: wait on */
    c.blocked = 0;
    c.unblocked = T0 + 8100;
    CHECK_INT(confirm_clock_left_ms(&c, T0 + 8100), RELAY_CONFIRM_QUIET_MS);
    c.confirmed = T0 + 12000; /* confirms trickle in */
    CHECK_INT(confirm_clock_left_ms(&c, T0 + 13100), RELAY_CONFIRM_QUIET_MS - 1100);
    c.confirmed = T0 + 16000;
    CHECK(confirm_clock_left_ms(&c, T0 + 18100) > 0); /* 10 s after the unblock, not given up */
    CHECK(confirm_clock_left_ms(&c, T0 + 16000 + RELAY_CONFIRM_QUIET_MS) <= 0);
}

/* A confirm from an earlier connection or batch does not extend a new claim's wait. */
static void test_old_confirm_does_not_count(void)
{
    confirm_clock c = {.claimed = T0, .confirmed = T0 - 3000, .unblocked = T0 - 60000};

    CHECK_INT(confirm_clock_left_ms(&c, T0 + 1000), RELAY_CONFIRM_QUIET_MS - 1000);
}

/* Confirms that keep coming never hold a batch past RELAY_BATCH_MAX_MS. */
static void test_batch_bound(void)
{
    long end = T0 + RELAY_BATCH_MAX_MS;
    confirm_clock c = {.claimed = T0, .confirmed = end - 1000};

    CHECK_INT(confirm_clock_left_ms(&c, end - 1000), 1000);
    CHECK(confirm_clock_left_ms(&c, end) <= 0);
    c.confirmed = 0;
    c.blocked = end - 2000; /* blocked near the end: the bound still holds */
    CHECK_INT(confirm_clock_left_ms(&c, end - 100), 100);
    CHECK(confirm_clock_left_ms(&c, end) <= 0);
}

/* A block stops the quiet clock, up to RELAY_BLOCKED_MAX_MS. */
static void test_block_bound(void)
{
    confirm_clock c = {.claimed = T0, .blocked = T0 + 10};

    CHECK_INT(confirm_clock_left_ms(&c, T0 + 20000), 200);
    CHECK_INT(confirm_clock_left_ms(&c, T0 + 10 + RELAY_BLOCKED_MAX_MS - 50), 50);
    CHECK(confirm_clock_left_ms(&c, T0 + 10 + RELAY_BLOCKED_MAX_MS) <= 0);
}

/* A stop ends the wait RELAY_STOP_WAIT_MS later, blocked or confirming. */
static void test_stop_bound(void)
{
    confirm_clock c = {.claimed = T0, .stopped = T0 + 1000};

    c.confirmed = T0 + 5900;
    CHECK_INT(confirm_clock_left_ms(&c, T0 + 5900), 100);
    CHECK(confirm_clock_left_ms(&c, T0 + 1000 + RELAY_STOP_WAIT_MS) <= 0);
    c.blocked = T0 + 2000;
    CHECK_INT(confirm_clock_left_ms(&c, T0 + 3000), 200);
    CHECK(confirm_clock_left_ms(&c, T0 + 1000 + RELAY_STOP_WAIT_MS) <= 0);
}

int main(void)
{
    test_silence_after_the_claim();
    test_slow_confirms_after_an_unblock();
    test_old_confirm_does_not_count();
    test_batch_bound();
    test_block_bound();
    test_stop_bound();
    return tcheck_summary("confirm_clock");
}
