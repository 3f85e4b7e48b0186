/* worker/settle/bank_sim.c - deterministic failures by payee, keyed on the attempt number */
#include "worker/settle/bank_sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/lib/items.h"

#define MAX_RULES 64

enum behaviour { FAIL_FIRST, DOWN, PERMANENT };

typedef struct rule {
    char bank[8];
    char account[32];
    enum behaviour behaviour;
    long n;
} rule;

typedef struct bank_sim {
    rule rules[MAX_RULES];
    int nrules;
} bank_sim;

static bool parse_rule(char *item, rule *r, char *why, size_t wlen)
{
    char *slash, *colon, *end;

    slash = strchr(item, '/');
    colon = slash ? strchr(slash, ':') : NULL;
    if (slash == NULL || colon == NULL || slash == item || colon == slash + 1) {
        snprintf(why, wlen, "\"%s\" is not <bank>/<account>:<behaviour>", item);
        return false;
    }
    *slash = *colon = '\0';
    if (strlen(item) >= sizeof r->bank || strlen(slash + 1) >= sizeof r->account) {
        snprintf(why, wlen, "bank or account too long in \"%s\"", item);
        return false;
    }
    strcpy(r->bank, item);
    strcpy(r->account, slash + 1);
    if (strcmp(colon + 1, "down") == 0) {
        r->behaviour = DOWN;
    } else if (strcmp(colon + 1, "permanent") == 0) {
        r->behaviour = PERMANENT;
    } else if (strncmp(colon + 1, "fail-first=", 11) == 0) {
        errno = 0;
        r->n = strtol(colon + 12, &end, 10);
        if (errno != 0 || end == colon + 12 || *end != '\0' || r->n < 0 || r->n > 1000) {
            snprintf(why, wlen, "fail-first needs a count 0..1000, got \"%s\"", colon + 12);
            return false;
        }
        r->behaviour = FAIL_FIRST;
    } else {
        snprintf(why, wlen, "unknown behaviour \"%s\" (fail-first=N, down, permanent)", colon + 1);
        return false;
    }
    return true;
}

static bool matches(const char *pattern, const char *value)
{
    return strcmp(pattern, "*") == 0 || strcmp(pattern, value) == 0;
}

static bank_result sim_one(const bank_sim *sim, const payment *p, int attempt, char *why,
                           size_t len)
{
    if (p->amount_cents == 0) {
        snprintf(why, len, "amount is zero");
        return BANK_PERMANENT;
    }
    for (int i = 0; i < sim->nrules; i++) {
        const rule *r = &sim->rules[i];

        if (!matches(r->bank, p->payee_bank) || !matches(r->account, p->payee_account))
            continue;
        switch (r->behaviour) {
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

static void sim_settle(void *impl, bank_call *calls, int n)
{
    for (int i = 0; i < n; i++)
        calls[i].result =
            sim_one(impl, calls[i].p, calls[i].attempt, calls[i].why, sizeof calls[i].why);
}

gw_err bank_sim_new(const char *rules, bank *out, char *why, size_t why_len)
{
    bank_sim *sim = calloc(1, sizeof *sim);
    char item[96];
    items it;
    int got;

    if (sim == NULL)
        return GW_ERR_NOMEM;
    items_init(&it, rules, ';');
    while ((got = items_next(&it, item, sizeof item)) != 0) {
        if (got < 0)
            snprintf(why, why_len, "rule too long");
        else if (sim->nrules == MAX_RULES)
            snprintf(why, why_len, "more than %d rules", MAX_RULES);
        if (got < 0 || sim->nrules == MAX_RULES ||
            !parse_rule(item, &sim->rules[sim->nrules], why, why_len)) {
            free(sim);
            return GW_ERR_INVALID;
        }
        sim->nrules++;
    }
    out->impl = sim;
    out->settle = sim_settle;
    out->free = free;
    return GW_OK;
}
