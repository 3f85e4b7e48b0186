/* api/params.h - the numbers of paths and query strings: decimal, bounded, nothing else */
#ifndef API_PARAMS_H
#define API_PARAMS_H

#include <stdbool.h>

/* params_long - @s as decimal digits only (no sign, no blanks), within @min..@max, into @out. */
bool params_long(const char *s, long min, long max, long *out);

#endif
