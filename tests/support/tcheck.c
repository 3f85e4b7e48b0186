/* tests/support/tcheck.c - failure counting shared by every test */
#include "tests/support/tcheck.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

static atomic_int checks;
static atomic_int failures;
static _Thread_local char context[256];

static void vreport(const char *file, int line, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void report(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void vreport(const char *file, int line, const char *fmt, va_list ap)
{
    char msg[2048];

    vsnprintf(msg, sizeof msg, fmt, ap);
    atomic_fetch_add(&failures, 1);
    /* one fprintf per line: stdio locks the stream, threads do not interleave */
    fprintf(stderr, "%s:%d: %s%s%s\n", file, line, context[0] ? context : "",
            context[0] ? ": " : "", msg);
}

static void report(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(file, line, fmt, ap);
    va_end(ap);
}

bool tcheck_true(const char *file, int line, const char *expr, bool ok)
{
    atomic_fetch_add(&checks, 1);
    if (!ok)
        report(file, line, "%s: got false, want true", expr);
    return ok;
}

bool tcheck_int(const char *file, int line, const char *expr, long long got, long long want)
{
    atomic_fetch_add(&checks, 1);
    if (got != want)
        report(file, line, "%s: got %lld, want %lld", expr, got, want);
    return got == want;
}

bool tcheck_str(const char *file, int line, const char *expr, const char *got, const char *want)
{
    bool ok = (got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0);

    atomic_fetch_add(&checks, 1);
    if (!ok)
        report(file, line, "%s: got %s%.300s%s, want %s%.300s%s", expr, got ? "\"" : "",
               got ? got : "NULL", got ? "\"" : "", want ? "\"" : "", want ? want : "NULL",
               want ? "\"" : "");
    return ok;
}

bool tcheck_contains(const char *file, int line, const char *expr, const char *hay,
                     const char *needle, bool want)
{
    bool has = hay != NULL && strstr(hay, needle) != NULL;

    atomic_fetch_add(&checks, 1);
    if (has != want)
        report(file, line, "%s: got %s%.600s%s, want %s \"%s\"", expr, hay ? "\"" : "",
               hay ? hay : "NULL", hay ? "\"" : "", want ? "a text containing" : "no", needle);
    return has == want;
}

bool tcheck_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    atomic_fetch_add(&checks, 1);
    va_start(ap, fmt);
    vreport(file, line, fmt, ap);
    va_end(ap);
    return false;
}

void tcheck_context(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
}

void tcheck_context_clear(void)
{
    context[0] = '\0';
}

int tcheck_failures(void)
{
    return atomic_load(&failures);
}

int tcheck_summary(const char *name)
{
    int n = atomic_load(&checks), f = atomic_load(&failures);

    printf("%s: %d checks, %d failed\n", name, n, f);
    if (n == 0)
        fprintf(stderr, "%s: no check ran: a test that skips must exit 77 itself\n", name);
    fflush(NULL);
    return f == 0 && n > 0 ? 0 : 1;
}
