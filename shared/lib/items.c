/* shared/lib/items.c - the items of a separated list, one at a time, each in a buffer */
#include "shared/lib/items.h"

#include <string.h>

void items_init(items *it, const char *list, char sep)
{
    it->next = list != NULL ? list : "";
    it->sep = sep;
}

int items_next(items *it, char *buf, size_t size)
{
    for (;;) {
        const char *end = strchr(it->next, it->sep);
        size_t len = end != NULL ? (size_t)(end - it->next) : strlen(it->next);
        const char *item = it->next;

        if (len == 0 && end == NULL)
            return 0;
        it->next = end != NULL ? end + 1 : item + len;
        if (len == 0)
            continue; /* "a;;b": nothing between two separators */
        if (len >= size) {
            memcpy(buf, item, size - 1);
            buf[size - 1] = '\0';
            return -1;
        }
        memcpy(buf, item, len);
        buf[len] = '\0';
        return 1;
    }
}
