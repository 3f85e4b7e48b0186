/* worker/settle/bank_sim.c - deterministic failures by payee, keyed on the attempt number */
#include "worker/settle/bank_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/bank_rules.h"

enum behaviour { FAIL_FIRST, DOWN, PERMANENT };

static const bank_rule_name behaviours[] = {
    {"fail-first=", FAIL_FIRST, 1000},
    {"down", DOWN, 0},
    {"permanent", PERMANENT, 0},
    {NULL, 0, 0},
};

typedef struct bank_sim {
    bank_rule rules[BANK_RULES_MAX];
    int nrules;
} bank_sim;

static bank_result sim_one(const bank_sim *sim, const payment *p, int attempt, char *why,
                           size_t len)
{
    if (p->amount_cents == 0) {
        snprintf(why, len, "amount is zero");
        return BANK_PERMANENT;
    }
    for (int i = 0; i < sim->nrules; i++) {
        const bank_rule *r = &sim->rules[i];

        if (!bank_rule_matches(r, p->payee_bank, p->payee_account))
            continue;
        switch ((enum behaviour)r->what) {
        case PERMANENT:
            snprintf(why, len, "bank %s refused account %s", p->payee_bank, p->payee_account);
            return BANK_PERMANENT;
        case DOWN:
            snprintf(why, len, "bank %s unavailable", p->payee_bank);
            return BANK_TRANSIENT;
        case FAIL_FIRST:
            if (attempt <= r->n) {
                snprintf(why, len, "bank %s unavailable (attempt %d of %ld failing)", p->payee_bank,
                         attempt, r->n);
                return BANK_TRANSIENT;
            }
            return BANK_OK;
        }
    }
    return BANK_OK;
}

static void sim_send(void *impl, int slot, bank_call *calls, int n)
{
    (void)slot; /* decided here: nothing is left in flight */
    for (int i = 0; i < n; i++)
        calls[i].result =
            sim_one(impl, calls[i].p, calls[i].attempt, calls[i].why, sizeof calls[i].why);
}

gw_err bank_sim_new(const char *rules, bank *out, char *why, size_t why_len)
{
    bank_sim *sim = calloc(1, sizeof *sim);

    if (sim == NULL)
        return GW_ERR_NOMEM;
    if (!bank_rules_parse(rules, behaviours, sim->rules, &sim->nrules, why, why_len)) {
        free(sim);
        return GW_ERR_INVALID;
    }
    out->impl = sim;
    out->send = sim_send;
    out->free = free;
    return GW_OK;
}
