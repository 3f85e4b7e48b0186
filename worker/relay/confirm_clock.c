/* worker/relay/confirm_clock.c - how long a batch may still wait for its confirms */
#include "worker/relay/confirm_clock.h"

static long min_l(long a, long b)
{
    return a < b ? a : b;
}

static long max_l(long a, long b)
{
    return a > b ? a : b;
}

long confirm_clock_left_ms(const confirm_clock *c, long now)
{
    long left = RELAY_BATCH_MAX_MS - (now - c->claimed);

    if (c->stopped != 0)
        left = min_l(left, RELAY_STOP_WAIT_MS - (now - c->stopped));
    if (c->blocked != 0) /* the broker reads nothing from us: silence proves nothing */
        return left <= 0 ? left
                         : min_l(min_l(left, RELAY_BLOCKED_MAX_MS - (now - c->blocked)), 200);
    /* quiet since the claim, the unblock or the last confirm, whichever came last */
    return min_l(left, RELAY_CONFIRM_QUIET_MS -
                           (now - max_l(c->claimed, max_l(c->unblocked, c->confirmed))));
}
