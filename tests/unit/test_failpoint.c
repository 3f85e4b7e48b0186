/* tests/unit/test_failpoint.c - GATEWAY_FAILPOINTS specs and what each action does */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shared/failpoint.h"
#include "tests/support/tcheck.h"

static void expect_valid(const char *spec, bool want)
{
    char why[160] = "";
    bool ok = failpoint_validate(spec, why, sizeof why);

    tcheck_context("spec \"%s\"", spec);
    CHECK_INT(ok, want);
    if (!want)
        CHECK(why[0] != '\0'); /* a refusal says why */
    tcheck_context_clear();
}

static void test_validate(void)
{
    static const char *const good[] = {
        "",
        "api.before_commit=exit",
        "api.after_commit=exit@1",
        "api.after_commit=exit@3",
        "api.before_commit=sleep=2000",
        "api.before_commit=sleep=0",
        "api.before_commit=error",
        "relay.after_publish=exit",
        "worker.before_commit=error",
        "worker.after_commit=exit@2",
        "worker.after_retry_publish=sleep=10",
        "api.before_commit=error;api.after_commit=exit",
        "api.before_commit=error;",
    };
    static const char *const bad[] = {
        "nope=exit",
        "api.before_commit",
        "api.before_commit=",
        "=exit",
        "api.before_commit=explode",
        "api.before_commit=exit@0",
        "api.before_commit=exit@",
        "api.before_commit=exit@x",
        "api.before_commit=exit@-1",
        "api.before_commit=sleep=",
        "api.before_commit=sleep=-1",
        "api.before_commit=sleep=abc",
        "api.before_commit=sleep=600001",
        "API.BEFORE_COMMIT=exit",
        "api.before_commit=error;bogus=exit",
        "api.before_commit=EXIT",
    };
    char long_spec[400];

    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        expect_valid(good[i], true);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_valid(bad[i], false);
    memset(long_spec, 'a', sizeof long_spec - 1);
    long_spec[sizeof long_spec - 1] = '\0';
    expect_valid(long_spec, false);
}

static void test_why_names_the_culprit(void)
{
    char why[160] = "";

    CHECK(!failpoint_validate("api.before_commit=error;bogus.point=exit", why, sizeof why));
    CHECK_CONTAINS(why, "bogus.point");
    CHECK(!failpoint_validate("api.before_commit=explode", why, sizeof why));
    CHECK_CONTAINS(why, "explode");
}

static void test_hit(void)
{
    failpoint_init(NULL);
    CHECK_INT(failpoint_hit("api.before_commit"), GW_OK); /* nothing armed */
    failpoint_init("api.before_commit=error");
    CHECK_INT(failpoint_hit("api.before_commit"), GW_ERR_DB);
    CHECK_INT(failpoint_hit("api.before_commit"), GW_ERR_DB); /* every hit */
    CHECK_INT(failpoint_hit("api.after_commit"), GW_OK);      /* other points stay off */
    CHECK_INT(failpoint_hit("no.such.point"), GW_OK);
    failpoint_init("api.before_commit=sleep=0");
    CHECK_INT(failpoint_hit("api.before_commit"), GW_OK);
    failpoint_init(NULL); /* disarms */
    CHECK_INT(failpoint_hit("api.before_commit"), GW_OK);
}

/* The exit status of a child that arms @spec and passes api.after_commit @hits times. */
static int child_status(const char *spec, int hits)
{
    pid_t pid;
    int ws;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        failpoint_init(spec);
        for (int i = 0; i < hits; i++)
            if (failpoint_hit("api.after_commit") != GW_OK)
                _exit(2);
        _exit(0); /* survived every hit */
    }
    if (pid < 0 || waitpid(pid, &ws, 0) != pid)
        return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

static void test_exit(void)
{
    CHECK_INT(child_status("api.after_commit=exit", 1), 137); /* like a crash */
    CHECK_INT(child_status("api.after_commit=exit@3", 2), 0);
    CHECK_INT(child_status("api.after_commit=exit@3", 3), 137);
    CHECK_INT(child_status("api.before_commit=exit", 5), 0); /* another point */
}

int main(void)
{
    TRUN(test_validate);
    TRUN(test_why_names_the_culprit);
    TRUN(test_hit);
    TRUN(test_exit);
    return tcheck_summary("test_failpoint");
}
