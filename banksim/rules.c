/* banksim/rules.c - the rule lists (shared/bank_rules.c parses them) and the call counts */
#include "banksim/rules.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/bank_rules.h"

#define COUNT_BUCKETS 65536 /* a bench sends 100,000s of keys: chains stay short */
#define COUNT_MAX     1000000

enum what {
    /* behaviours (BANK_SIM_RULES) */
    FAIL_FIRST,
    DOWN,
    PERMANENT,
    /* faults (BANK_SIM_FAULTS) */
    DROP_AFTER_EXECUTE,
    DROP_FIRST,
    LATE,
    STATUS_5XX_FIRST,
};

typedef struct count {
    struct count *next; /* owned */
    long n;
    char key[]; /* NUL-terminated */
} count;

struct rules {
    bank_rule behaviours[BANK_RULES_MAX];
    int nbehaviours;
    bank_rule faults[BANK_RULES_MAX];
    int nfaults;
    pthread_mutex_t lock; /* guards counts */
    count *counts[COUNT_BUCKETS];
};

static const bank_rule_name behaviour_names[] = {
    {"fail-first=", FAIL_FIRST, 1000},
    {"down", DOWN, 0},
    {"permanent", PERMANENT, 0},
    {NULL, 0, 0},
};
static const bank_rule_name fault_names[] = {
    {"drop-after-execute", DROP_AFTER_EXECUTE, 0},
    {"drop-first=", DROP_FIRST, 1000},
    {"late=", LATE, RULES_LATE_MAX_MS},
    {"5xx-first=", STATUS_5XX_FIRST, 1000},
    {NULL, 0, 0},
};

/* The list @spec of variable @var into @out; the reason, named after @var, into @why. */
static bool parse_list(const char *spec, const char *var, const bank_rule_name *names,
                       bank_rule *out, int *n, char *why, size_t wlen)
{
    char detail[200];

    if (bank_rules_parse(spec, names, out, n, detail, sizeof detail))
        return true;
    snprintf(why, wlen, "%s: %s", var, detail);
    return false;
}

gw_err rules_new(const char *rules_spec, const char *faults_spec, rules **out, char *why,
                 size_t why_len)
{
    rules *r = calloc(1, sizeof *r);

    if (r == NULL)
        return GW_ERR_NOMEM;
    pthread_mutex_init(&r->lock, NULL);
    if (!parse_list(rules_spec, "BANK_SIM_RULES", behaviour_names, r->behaviours, &r->nbehaviours,
                    why, why_len) ||
        !parse_list(faults_spec, "BANK_SIM_FAULTS", fault_names, r->faults, &r->nfaults, why,
                    why_len)) {
        rules_free(r);
        return GW_ERR_INVALID;
    }
    *out = r;
    return GW_OK;
}

void rules_free(rules *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < COUNT_BUCKETS; i++) {
        for (count *c = r->counts[i], *next; c != NULL; c = next) {
            next = c->next;
            free(c);
        }
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
}

long rules_next_call(rules *r, const char *key)
{
    size_t h = 5381;
    count *c;
    long n;

    for (const char *p = key; *p; p++)
        h = h * 33 + (unsigned char)*p;
    h %= COUNT_BUCKETS;
    pthread_mutex_lock(&r->lock);
    for (c = r->counts[h]; c != NULL && strcmp(c->key, key) != 0; c = c->next)
        ;
    if (c == NULL && (c = malloc(sizeof *c + strlen(key) + 1)) != NULL) {
        strcpy(c->key, key);
        c->n = 0;
        c->next = r->counts[h];
        r->counts[h] = c;
    }
    /* out of memory: every call counts as a late one, so the transfer is not held back */
    n = c == NULL ? COUNT_MAX : c->n < COUNT_MAX ? ++c->n : COUNT_MAX;
    pthread_mutex_unlock(&r->lock);
    return n;
}

rules_verdict rules_decide(const rules *r, const char *bank, const char *account, long call,
                           char *why, size_t why_len)
{
    for (int i = 0; i < r->nbehaviours; i++) {
        const bank_rule *b = &r->behaviours[i];

        if (!bank_rule_matches(b, bank, account))
            continue;
        switch (b->what) {
        case PERMANENT:
            snprintf(why, why_len, "bank %s refused account %s", bank, account);
            return RULES_BLOCKED;
        case DOWN:
            snprintf(why, why_len, "bank %s unavailable", bank);
            return RULES_UNAVAILABLE;
        case FAIL_FIRST:
            if (call <= b->n) {
                snprintf(why, why_len, "bank %s unavailable (call %ld of %ld failing)", bank, call,
                         b->n);
                return RULES_UNAVAILABLE;
            }
            return RULES_EXECUTE;
        default:
            break; /* faults are not in this list */
        }
    }
    return RULES_EXECUTE;
}

void rules_faults_for(const rules *r, const char *bank, const char *account, long call,
                      rules_faults *out)
{
    bool seen_drop = false, seen_late = false, seen_5xx = false;

    memset(out, 0, sizeof *out);
    for (int i = 0; i < r->nfaults; i++) {
        const bank_rule *f = &r->faults[i];

        if (!bank_rule_matches(f, bank, account))
            continue;
        switch (f->what) {
        case DROP_AFTER_EXECUTE:
        case DROP_FIRST:
            if (!seen_drop) {
                out->drop_always = f->what == DROP_AFTER_EXECUTE;
                out->drop = out->drop_always || call <= f->n;
            }
            seen_drop = true;
            break;
        case LATE:
            if (!seen_late)
                out->late_ms = (int)f->n;
            seen_late = true;
            break;
        case STATUS_5XX_FIRST:
            if (!seen_5xx)
                out->status_500 = call <= f->n;
            seen_5xx = true;
            break;
        default:
            break; /* behaviours are not in this list */
        }
    }
}
