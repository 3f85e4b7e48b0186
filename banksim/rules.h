/* banksim/rules.h - what the simulated bank does with a transfer: BANK_SIM_RULES and
 * BANK_SIM_FAULTS (docs/payments-banksim.md, "Rules" and "Faults") */
#ifndef BANKSIM_RULES_H
#define BANKSIM_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "shared/lib/err.h"

#define RULES_LATE_MAX_MS 60000

typedef struct rules rules;

/* The business answer to a new transfer (contract section 5). */
typedef enum rules_verdict {
    RULES_EXECUTE,
    RULES_UNAVAILABLE, /* fail-first=N within its N calls, or down: 503 bank_unavailable */
    RULES_BLOCKED,     /* permanent: 422 account_blocked */
} rules_verdict;

/* The faults that apply to one call; all zero: none. */
typedef struct rules_faults {
    bool status_500;  /* 5xx-first=N within its N calls: 500 before anything happens */
    bool drop;        /* drop-after-execute, or drop-first=N within its N calls */
    bool drop_always; /* the drop is drop-after-execute's */
    int late_ms;      /* late=MS: the answer waits this long */
} rules_faults;

/*
 * rules_new - parse @rules_spec (BANK_SIM_RULES) and @faults_spec
 * (BANK_SIM_FAULTS), both ";"-separated "<bank>/<account>:<what>" with "*"
 * matching any bank or account; NULL or "" is no rule. Behaviours:
 * fail-first=N, down, permanent. Faults: drop-after-execute, drop-first=N,
 * late=MS, 5xx-first=N. On GW_ERR_INVALID @why names the bad item and which
 * variable it is in. On GW_OK *@out is owned by the caller (rules_free()).
 */
GW_MUSTCHECK gw_err rules_new(const char *rules_spec, const char *faults_spec, rules **out,
                              char *why, size_t why_len);

/* rules_free - accepts NULL. */
void rules_free(rules *r);

/*
 * rules_next_call - count one more call for the idempotency key @key
 * (borrowed) and return its number: 1 for the first. Kept in memory only, so
 * a restart counts from 1 again. Safe from any thread.
 */
long rules_next_call(rules *r, const char *key);

/*
 * rules_decide - the verdict for a transfer to @bank/@account on call @call
 * of its key; the first matching rule decides. @why gets the detail of a
 * refusal. A zero amount is the caller's check, before this.
 */
rules_verdict rules_decide(const rules *r, const char *bank, const char *account, long call,
                           char *why, size_t why_len);

/* rules_faults_for - the faults for call @call to @bank/@account: each kind's first match. */
void rules_faults_for(const rules *r, const char *bank, const char *account, long call,
                      rules_faults *out);

#endif
