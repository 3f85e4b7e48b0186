/* worker/settle/bank_sim.h - the built-in simulated bank (BANK_SIM_RULES, docs/payments-worker.md,
 * "The simulated bank") */
#ifndef WORKER_SETTLE_BANK_SIM_H
#define WORKER_SETTLE_BANK_SIM_H

#include <stdbool.h>
#include <stddef.h>

#include "shared/lib/err.h"
#include "worker/settle/bank.h"

/*
 * bank_sim_new - a bank from @rules: ";"-separated "<bank>/<account>:<behaviour>"
 * with behaviour fail-first=N, down or permanent; "*" matches any account (or
 * bank). NULL or "" means every payment succeeds. R$ 0 always fails
 * permanently. On GW_ERR_INVALID @why says which rule is wrong.
 */
GW_MUSTCHECK gw_err bank_sim_new(const char *rules, bank *out, char *why, size_t why_len);

#endif
