/* tests/unit/test_bank_sim.c - BANK_SIM_RULES: the grammar, and what each behaviour answers */
#include <stdio.h>
#include <string.h>

#include "tests/support/tcheck.h"
#include "worker/settle/bank_sim.h"

static payment pay(const char *payee_bank, const char *account, long long cents)
{
    payment p;

    memset(&p, 0, sizeof p);
    snprintf(p.payee_bank, sizeof p.payee_bank, "%s", payee_bank);
    snprintf(p.payee_account, sizeof p.payee_account, "%s", account);
    p.amount_cents = cents;
    return p;
}

/* The result for one payment and attempt under @rules (which must be valid). */
static bank_result settle_with(const char *rules, const payment *p, int attempt, char *why,
                               size_t len)
{
    bank b = {0};
    char err[160] = "";
    bank_result r;

    if (bank_sim_new(rules, &b, err, sizeof err) != GW_OK) {
        FAIL("rules \"%s\" refused: %s", rules, err);
        return BANK_OK;
    }
    bank_call call = {.p = p, .attempt = attempt};

    bank_settle(&b, &call, 1);
    snprintf(why, len, "%s", call.why);
    r = call.result;
    bank_free(&b);
    return r;
}

static void test_no_rules_succeed(void)
{
    payment p = pay("001", "1111-1", 1250);
    char why[BANK_WHY_MAX];

    CHECK_INT(settle_with(NULL, &p, 1, why, sizeof why), BANK_OK);
    CHECK_INT(settle_with("", &p, 1, why, sizeof why), BANK_OK);
    CHECK_INT(settle_with("033/*:down", &p, 1, why, sizeof why), BANK_OK); /* no match */
}

static void test_zero_amount_is_permanent(void)
{
    payment p = pay("001", "1111-1", 0);
    char why[BANK_WHY_MAX] = "";

    CHECK_INT(settle_with("", &p, 1, why, sizeof why), BANK_PERMANENT);
    CHECK_STR(why, "amount is zero");
}

static void test_fail_first(void)
{
    payment p = pay("001", "2222-2", 1250);
    char why[BANK_WHY_MAX] = "";

    CHECK_INT(settle_with("001/2222-2:fail-first=2", &p, 1, why, sizeof why), BANK_TRANSIENT);
    CHECK_CONTAINS(why, "attempt 1 of 2");
    CHECK_INT(settle_with("001/2222-2:fail-first=2", &p, 2, why, sizeof why), BANK_TRANSIENT);
    CHECK_INT(settle_with("001/2222-2:fail-first=2", &p, 3, why, sizeof why), BANK_OK);
    CHECK_INT(settle_with("001/2222-2:fail-first=0", &p, 1, why, sizeof why), BANK_OK);
}

static void test_down_and_permanent(void)
{
    payment p = pay("033", "9", 1250);
    char why[BANK_WHY_MAX] = "";

    CHECK_INT(settle_with("033/*:down", &p, 1, why, sizeof why), BANK_TRANSIENT);
    CHECK_INT(settle_with("033/*:down", &p, 1000, why, sizeof why), BANK_TRANSIENT);
    CHECK_STR(why, "bank 033 unavailable");
    CHECK_INT(settle_with("*/9:permanent", &p, 1, why, sizeof why), BANK_PERMANENT);
    CHECK_STR(why, "bank 033 refused account 9");
}

static void test_first_match_wins(void)
{
    payment p = pay("033", "9", 1250);
    char why[BANK_WHY_MAX];

    CHECK_INT(settle_with("033/9:permanent;033/*:down", &p, 1, why, sizeof why), BANK_PERMANENT);
    CHECK_INT(settle_with("033/*:down;033/9:permanent", &p, 1, why, sizeof why), BANK_TRANSIENT);
    CHECK_INT(settle_with(";;001/*:down;", &p, 1, why, sizeof why), BANK_OK); /* empty items */
}

static void test_bad_rules(void)
{
    static const char *const bad[] = {
        "001",                     /* no account, no behaviour */
        "001/2222-2",              /* no behaviour */
        "/2222-2:down",            /* no bank */
        "001/:down",               /* no account */
        "001/2222-2:sometimes",    /* unknown behaviour */
        "001/2222-2:fail-first=",  /* no count */
        "001/2222-2:fail-first=x", /* not a count */
        "001/2222-2:fail-first=-1",
        "001/2222-2:fail-first=1001",
        "001234567/1:down", /* bank too long */
    };
    char many[64 * 12 + 16] = "", why[160];
    bank b = {0};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tcheck_context("rules \"%s\"", bad[i]);
        why[0] = '\0';
        CHECK_INT(bank_sim_new(bad[i], &b, why, sizeof why), GW_ERR_INVALID);
        CHECK(why[0] != '\0');
    }
    tcheck_context_clear();
    for (int i = 0; i < 65; i++)
        strcat(many, "001/1:down;");
    CHECK_INT(bank_sim_new(many, &b, why, sizeof why), GW_ERR_INVALID);
    CHECK_CONTAINS(why, "more than 64 rules");
}

int main(void)
{
    TRUN(test_no_rules_succeed);
    TRUN(test_zero_amount_is_permanent);
    TRUN(test_fail_first);
    TRUN(test_down_and_permanent);
    TRUN(test_first_match_wins);
    TRUN(test_bad_rules);
    return tcheck_summary("bank_sim");
}
