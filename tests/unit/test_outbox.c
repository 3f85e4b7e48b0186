/* tests/unit/test_outbox.c - outbox_id_array: one array literal per fate, for one UPDATE each */
#include <stdint.h>
#include <stdlib.h>

#include "tests/support/tcheck.h"
#include "worker/relay/outbox.h"

static void expect(const outbox_row *rows, size_t n, outbox_fate fate, const char *want)
{
    bool oom = true;
    char *s = outbox_id_array(rows, n, fate, &oom);

    CHECK(!oom);
    if (want == NULL)
        CHECK(s == NULL);
    else if (CHECK(s != NULL))
        CHECK_STR(s, want);
    free(s);
}

int main(void)
{
    outbox_row rows[5] = {
        {.id = 7, .fate = OUTBOX_CONFIRMED},
        {.id = INT64_MAX, .fate = OUTBOX_CONFIRMED}, /* the widest id still fits */
        {.id = 9, .fate = OUTBOX_NACKED},
        {.id = 10, .fate = OUTBOX_RETURNED},
        {.id = 11, .fate = OUTBOX_CONFIRMED},
    };

    expect(rows, 5, OUTBOX_CONFIRMED, "{7,9223372036854775807,11}");
    expect(rows, 5, OUTBOX_NACKED, "{9}");
    expect(rows, 5, OUTBOX_UNSETTLED, NULL); /* nothing to mark: no statement at all */
    expect(rows, 0, OUTBOX_CONFIRMED, NULL);
    expect(rows + 1, 1, OUTBOX_CONFIRMED, "{9223372036854775807}");
    return tcheck_summary("test_outbox");
}
