/* shared/bank_rules.c - one parser for the rule lists of the simulated banks */
#include "shared/bank_rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/lib/items.h"

static bool parse_what(const char *s, const bank_rule_name *names, bank_rule *r, char *why,
                       size_t wlen)
{
    char list[160] = "";
    size_t at = 0;

    for (const bank_rule_name *nm = names; nm->name != NULL; nm++) {
        size_t len = strlen(nm->name);
        char *end;

        at += (size_t)snprintf(list + at, at < sizeof list ? sizeof list - at : 0, "%s%s%s",
                               at ? ", " : "", nm->name, nm->name[len - 1] == '=' ? "N" : "");
        if (nm->name[len - 1] != '=') {
            if (strcmp(s, nm->name) != 0)
                continue;
            r->what = nm->what;
            return true;
        }
        if (strncmp(s, nm->name, len) != 0)
            continue;
        errno = 0;
        r->n = strtol(s + len, &end, 10);
        if (errno != 0 || end == s + len || *end != '\0' || r->n < 0 || r->n > nm->max) {
            snprintf(why, wlen, "%.*s needs a number 0..%ld, got \"%s\"", (int)len - 1, nm->name,
                     nm->max, s + len);
            return false;
        }
        r->what = nm->what;
        return true;
    }
    snprintf(why, wlen, "unknown \"%s\" (%s)", s, list);
    return false;
}

static bool parse_rule(char *item, const bank_rule_name *names, bank_rule *r, char *why,
                       size_t wlen)
{
    char *slash = strchr(item, '/'), *colon = slash ? strchr(slash, ':') : NULL;

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

bool bank_rules_parse(const char *spec, const bank_rule_name *names, bank_rule *out, int *n,
                      char *why, size_t wlen)
{
    char item[96];
    items it;
    int got;

    *n = 0;
    items_init(&it, spec, ';');
    while ((got = items_next(&it, item, sizeof item)) != 0) {
        if (got < 0) {
            snprintf(why, wlen, "rule too long");
            return false;
        }
        if (*n == BANK_RULES_MAX) {
            snprintf(why, wlen, "more than %d rules", BANK_RULES_MAX);
            return false;
        }
        memset(&out[*n], 0, sizeof out[*n]);
        if (!parse_rule(item, names, &out[*n], why, wlen))
            return false;
        (*n)++;
    }
    return true;
}

static bool matches(const char *pattern, const char *value)
{
    return strcmp(pattern, "*") == 0 || strcmp(pattern, value) == 0;
}

bool bank_rule_matches(const bank_rule *r, const char *bank, const char *account)
{
    return matches(r->bank, bank) && matches(r->account, account);
}
