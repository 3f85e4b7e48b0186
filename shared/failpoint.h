/* shared/failpoint.h - fault injection at named boundaries (docs/operations.md, "Failpoints") */
#ifndef SHARED_FAILPOINT_H
#define SHARED_FAILPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "shared/lib/err.h"

/*
 * GATEWAY_FAILPOINTS="name=action[;name=action]", action one of:
 *   exit      _exit(137) at the first hit, like a crash
 *   exit@N    _exit(137) at the N-th hit
 *   sleep=MS  sleep MS milliseconds at every hit
 *   error     the boundary fails (the caller treats it as a database error)
 */

/* failpoint_validate - false, with a reason in @why, when @spec is malformed. */
bool failpoint_validate(const char *spec, char *why, size_t len);

/* failpoint_init - arm the points of @spec (validated before). NULL disarms all. */
void failpoint_init(const char *spec);

/*
 * failpoint_hit - pass the point @name. Returns GW_OK, or GW_ERR_DB for
 * "error"; may sleep or never return ("exit"). Nearly free when nothing is armed.
 */
GW_MUSTCHECK gw_err failpoint_hit(const char *name);

#endif
