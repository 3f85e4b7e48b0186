/* shared/lib/items.h - the items of a separated list ("a;b;c"), one at a time, each in a buffer */
#ifndef SHARED_LIB_ITEMS_H
#define SHARED_LIB_ITEMS_H

#include <stddef.h>

typedef struct items {
    const char *next; /* borrowed: the rest of the list */
    char sep;
} items;

/* items_init - walk @list (borrowed; NULL is an empty list) split at @sep. */
void items_init(items *it, const char *list, char sep);

/*
 * items_next - the next non-empty item, NUL-terminated, into @buf (@size
 * bytes). 1: one is there; 0: the list is done; -1: the item does not fit
 * (@buf then holds as much of it as fits).
 */
int items_next(items *it, char *buf, size_t size);

#endif
