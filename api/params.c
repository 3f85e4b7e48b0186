/* api/params.c - bounded decimal parameters */
#include "api/params.h"

#include <errno.h>
#include <stdlib.h>

bool params_long(const char *s, long min, long max, long *out)
{
    char *end;

    if (s == NULL || *s < '0' || *s > '9')
        return false;
    errno = 0;
    *out = strtol(s, &end, 10);
    return errno == 0 && *end == '\0' && *out >= min && *out <= max;
}
