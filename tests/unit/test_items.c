/* tests/unit/test_items.c - items_next: empty items skipped, too long ones reported */
#include "shared/lib/items.h"
#include "tests/support/tcheck.h"

int main(void)
{
    char buf[8];
    items it;

    items_init(&it, ";a;;bc;", ';');
    CHECK_INT(items_next(&it, buf, sizeof buf), 1);
    CHECK_STR(buf, "a");
    CHECK_INT(items_next(&it, buf, sizeof buf), 1);
    CHECK_STR(buf, "bc");
    CHECK_INT(items_next(&it, buf, sizeof buf), 0);
    CHECK_INT(items_next(&it, buf, sizeof buf), 0); /* done stays done */

    items_init(&it, NULL, ';');
    CHECK_INT(items_next(&it, buf, sizeof buf), 0);

    items_init(&it, "1234567;12345678;x", ';');
    CHECK_INT(items_next(&it, buf, sizeof buf), 1); /* 7 bytes and the NUL: fits */
    CHECK_STR(buf, "1234567");
    CHECK_INT(items_next(&it, buf, sizeof buf), -1); /* 8 bytes: does not */
    CHECK_STR(buf, "1234567");
    CHECK_INT(items_next(&it, buf, sizeof buf), 1); /* and the walk goes on after it */
    CHECK_STR(buf, "x");
    return tcheck_summary("test_items");
}
