/* shared/lib/names.h - a word's place in a table of names: enums read from text */
#ifndef SHARED_LIB_NAMES_H
#define SHARED_LIB_NAMES_H

#include <stddef.h>

/*
 * names_find - the index of @s in @names (@n entries; NULL entries never
 * match), or -1. A table indexed by an enum reads the enum from its text.
 */
int names_find(const char *const *names, size_t n, const char *s);

#define NAMES_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* NAMES_FIND - names_find() over a whole array. */
#define NAMES_FIND(a, s) names_find((a), NAMES_COUNT(a), (s))

#endif
