/* tests/unit/test_bank_rules.c - shared/bank_rules.c: the grammar both simulated banks read */
#include <stdio.h>
#include <string.h>

#include "shared/bank_rules.h"
#include "tests/support/tcheck.h"

enum { DOWN, FAIL_FIRST, LATE };

static const bank_rule_name names[] = {
    {"down", DOWN, 0},
    {"fail-first=", FAIL_FIRST, 1000},
    {"late=", LATE, 30000},
    {NULL, 0, 0},
};

static void test_a_list(void)
{
    bank_rule r[BANK_RULES_MAX];
    char why[200] = "";
    int n = -1;

    CHECK(bank_rules_parse(NULL, names, r, &n, why, sizeof why));
    CHECK_INT(n, 0);
    CHECK(bank_rules_parse("", names, r, &n, why, sizeof why));
    CHECK_INT(n, 0);
    if (!CHECK(bank_rules_parse("001/*:down;237/9999-1:fail-first=2;*/7777-7:late=2500", names, r,
                                &n, why, sizeof why)))
        return;
    CHECK_INT(n, 3);
    CHECK_STR(r[0].bank, "001");
    CHECK_INT(r[0].what, DOWN);
    CHECK_INT(r[1].what, FAIL_FIRST);
    CHECK_INT(r[1].n, 2);
    CHECK_INT(r[2].what, LATE);
    CHECK_INT(r[2].n, 2500);
    CHECK(bank_rule_matches(&r[0], "001", "anything"));
    CHECK(!bank_rule_matches(&r[0], "002", "anything"));
    CHECK(bank_rule_matches(&r[1], "237", "9999-1"));
    CHECK(!bank_rule_matches(&r[1], "237", "9999-2"));
    CHECK(bank_rule_matches(&r[2], "104", "7777-7"));
}

static void test_bad_lists(void)
{
    static const struct {
        const char *spec, *why;
    } bad[] = {
        {"001:down", "is not <bank>/<account>:<what>"},
        {"/1:down", "is not <bank>/<account>:<what>"},
        {"001/:down", "is not <bank>/<account>:<what>"},
        {"001/1:sometimes", "unknown \"sometimes\" (down, fail-first=N, late=N)"},
        {"001/1:fail-first=", "fail-first needs a number 0..1000"},
        {"001/1:fail-first=x", "fail-first needs a number 0..1000"},
        {"001/1:fail-first=-1", "fail-first needs a number 0..1000"},
        {"001/1:late=30001", "late needs a number 0..30000"},
        {"001234567/1:down", "bank or account too long"},
    };
    char many[BANK_RULES_MAX * 12 + 16] = "", long_item[200], why[200];
    bank_rule r[BANK_RULES_MAX];
    int n;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tcheck_context("rules \"%s\"", bad[i].spec);
        why[0] = '\0';
        CHECK(!bank_rules_parse(bad[i].spec, names, r, &n, why, sizeof why));
        CHECK_CONTAINS(why, bad[i].why);
    }
    tcheck_context_clear();
    for (int i = 0; i <= BANK_RULES_MAX; i++)
        strcat(many, "001/1:down;");
    CHECK(!bank_rules_parse(many, names, r, &n, why, sizeof why));
    CHECK_CONTAINS(why, "more than 64 rules");
    memset(long_item, 'a', sizeof long_item - 1);
    long_item[sizeof long_item - 1] = '\0';
    CHECK(!bank_rules_parse(long_item, names, r, &n, why, sizeof why));
    CHECK_CONTAINS(why, "rule too long");
}

int main(void)
{
    TRUN(test_a_list);
    TRUN(test_bad_lists);
    return tcheck_summary("test_bank_rules");
}
