/* tests/unit/test_tcheck.c - a test binary that ran no check does not pass */
#include <stdio.h>

#include "tests/support/tcheck.h"

int main(void)
{
    /* nothing checked yet: a test that silently did nothing must fail, not pass */
    int none = tcheck_summary("no checks (expected to fail)");
    int one;

    CHECK(1 + 1 == 2);
    one = tcheck_summary("one passing check");
    CHECK_INT(none, 1);
    CHECK_INT(one, 0);
    return tcheck_summary("test_tcheck");
}
