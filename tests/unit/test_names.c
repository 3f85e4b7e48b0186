/* tests/unit/test_names.c - names_find: an enum read from its text, holes skipped */
#include "shared/lib/names.h"
#include "tests/support/tcheck.h"

enum color { RED, GREEN, BLUE = 3 };

int main(void)
{
    static const char *const names[] = {[RED] = "red", [GREEN] = "green", [BLUE] = "blue"};

    CHECK_INT(NAMES_COUNT(names), 4);
    CHECK_INT(names_find(names, NAMES_COUNT(names), "red"), RED);
    CHECK_INT(names_find(names, NAMES_COUNT(names), "green"), GREEN);
    CHECK_INT(names_find(names, NAMES_COUNT(names), "blue"), BLUE);
    CHECK_INT(names_find(names, NAMES_COUNT(names), "gree"), -1); /* whole words only */
    CHECK_INT(names_find(names, NAMES_COUNT(names), "greens"), -1);
    CHECK_INT(names_find(names, NAMES_COUNT(names), ""), -1); /* the hole at 2 matches nothing */
    CHECK_INT(names_find(names, 2, "blue"), -1);               /* only the first @n entries */
    return tcheck_summary("test_names");
}
