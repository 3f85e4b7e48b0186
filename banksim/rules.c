/* banksim/rules.c - the rule lists (parsed like worker/settle/bank_sim.c) and the call counts */
#include "banksim/rules.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/lib/items.h"

#define MAX_RULES     64
#define COUNT_BUCKETS 4096
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

typedef struct rule {
    char bank[16];
    char account[40];
    enum what what;
    long n; /* the N of fail-first, drop-first, 5xx-first; the MS of late */
} rule;

typedef struct count {
    struct count *next; /* owned */
    long n;
    char key[]; /* NUL-terminated */
} count;

struct rules {
    rule behaviours[MAX_RULES];
    int nbehaviours;
    rule faults[MAX_RULES];
    int nfaults;
    pthread_mutex_t lock; /* guards counts */
    count *counts[COUNT_BUCKETS];
};

/* Names with an "=N" argument, the argument's range, and what they become. */
typedef struct spelling {
    const char *name; /* "down", or "fail-first=" when it takes a number */
    enum what what;
    long max;
} spelling;

static const spelling behaviour_names[] = {
    {"fail-first=", FAIL_FIRST, 1000},
    {"down", DOWN, 0},
    {"permanent", PERMANENT, 0},
    {NULL, DOWN, 0},
};
static const spelling fault_names[] = {
    {"drop-after-execute", DROP_AFTER_EXECUTE, 0},
    {"drop-first=", DROP_FIRST, 1000},
    {"late=", LATE, RULES_LATE_MAX_MS},
    {"5xx-first=", STATUS_5XX_FIRST, 1000},
    {NULL, DOWN, 0},
};

static bool parse_what(const char *s, const spelling *names, rule *r, char *why, size_t wlen)
{
    for (const spelling *sp = names; sp->name != NULL; sp++) {
        size_t len = strlen(sp->name);
        char *end;

        if (sp->name[len - 1] != '=') {
            if (strcmp(s, sp->name) != 0)
                continue;
            r->what = sp->what;
            return true;
        }
        if (strncmp(s, sp->name, len) != 0)
            continue;
        errno = 0;
        r->n = strtol(s + len, &end, 10);
        if (errno != 0 || end == s + len || *end != '\0' || r->n < 0 || r->n > sp->max) {
            snprintf(why, wlen, "%.*s needs a number 0..%ld, got \"%s\"", (int)len - 1, sp->name,
                     sp->max, s + len);
            return false;
        }
        r->what = sp->what;
        return true;
    }
    snprintf(why, wlen, "unknown \"%s\"", s);
    return false;
}

static bool parse_rule(char *item, const spelling *names, rule *r, char *why, size_t wlen)
{
    char *slash, *colon;

    slash = strchr(item, '/');
    colon = slash ? strchr(slash, ':') : NULL;
    if (slash == NULL || colon == NULL || slash == item || colon == slash + 1) {
        snprintf(why, wlen, "\"%s\" is not <bank>/<account>:<what>", item);
        return false;
    }
    *slash = *colon = '\0';
    if (strlen(item) >= sizeof r->bank || strlen(slash + 1) >= sizeof r->account) {
        snprintf(why, wlen, "bank or account too long in \"%s\"", item);
        return false;
    }
    strcpy(r->bank, item);
    strcpy(r->account, slash + 1);
    return parse_what(colon + 1, names, r, why, wlen);
}

static bool parse_list(const char *spec, const char *var, const spelling *names, rule *out, int *n,
                       char *why, size_t wlen)
{
    char item[96], detail[160];
    items it;
    int got;

    items_init(&it, spec, ';');
    while ((got = items_next(&it, item, sizeof item)) != 0) {
        if (got < 0)
            snprintf(detail, sizeof detail, "an item is too long");
        else if (*n == MAX_RULES)
            snprintf(detail, sizeof detail, "more than %d items", MAX_RULES);
        if (got < 0 || *n == MAX_RULES ||
            !parse_rule(item, names, &out[*n], detail, sizeof detail)) {
            snprintf(why, wlen, "%s: %s", var, detail);
            return false;
        }
        (*n)++;
    }
    return true;
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

static bool matches(const rule *r, const char *bank, const char *account)
{
    return (strcmp(r->bank, "*") == 0 || strcmp(r->bank, bank) == 0) &&
           (strcmp(r->account, "*") == 0 || strcmp(r->account, account) == 0);
}

rules_verdict rules_decide(const rules *r, const char *bank, const char *account, long call,
                           char *why, size_t why_len)
{
    for (int i = 0; i < r->nbehaviours; i++) {
        const rule *b = &r->behaviours[i];

        if (!matches(b, bank, account))
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
        const rule *f = &r->faults[i];

        if (!matches(f, bank, account))
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
