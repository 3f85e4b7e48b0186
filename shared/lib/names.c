/* shared/lib/names.c - a word's place in a table of names */
#include "shared/lib/names.h"

#include <string.h>

int names_find(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] != NULL && strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}
