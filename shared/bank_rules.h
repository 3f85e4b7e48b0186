/* shared/bank_rules.h - the simulated bank's rule lists: "<bank>/<account>:<what>;...", as
 * BANK_SIM_RULES (contract section 5) and payments-banksim's BANK_SIM_FAULTS spell them */
#ifndef SHARED_BANK_RULES_H
#define SHARED_BANK_RULES_H

#include <stdbool.h>
#include <stddef.h>

#define BANK_RULES_MAX 64

/* One rule: "*" as bank or account matches any. */
typedef struct bank_rule {
    char bank[8];
    char account[40];
    int what; /* one of the caller's names (bank_rule_name.what) */
    long n;   /* the number of a "name=N" */
} bank_rule;

/* A spelling the caller accepts: "down", or "fail-first=" taking a number 0..max. */
typedef struct bank_rule_name {
    const char *name; /* NULL ends the list */
    int what;
    long max;
} bank_rule_name;

/*
 * bank_rules_parse - the ';'-separated list @spec (NULL or "": none) into @out (room for
 * BANK_RULES_MAX) and its length into *@n, each <what> one of @names. False with the
 * reason in @why when an item is malformed, too long, or one too many.
 */
bool bank_rules_parse(const char *spec, const bank_rule_name *names, bank_rule *out, int *n,
                      char *why, size_t wlen);

/* bank_rule_matches - whether @r applies to the payee @bank / @account. */
bool bank_rule_matches(const bank_rule *r, const char *bank, const char *account);

#endif
