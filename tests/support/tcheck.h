/* tests/support/tcheck.h - checks that report "file:line: what: got X, want Y" and count failures
 */
#ifndef TESTS_SUPPORT_TCHECK_H
#define TESTS_SUPPORT_TCHECK_H

#include <stdbool.h>
#include <stdio.h>

/*
 * Every check prints nothing when it holds; when it fails it prints one line on
 * stderr (with the current context, see tcheck_context()) and counts the
 * failure. Each returns whether it held, so a test can stop early:
 *     if (!CHECK_INT(r.status, 202)) return;
 * Checks may run on several threads at once.
 */
#define CHECK(cond) tcheck_true(__FILE__, __LINE__, #cond, (cond))
#define CHECK_INT(got, want)                                                                       \
    tcheck_int(__FILE__, __LINE__, #got, (long long)(got), (long long)(want))
#define CHECK_STR(got, want) tcheck_str(__FILE__, __LINE__, #got, (got), (want))
/* CHECK_CONTAINS - @hay (may be NULL) contains @needle. */
#define CHECK_CONTAINS(hay, needle) tcheck_contains(__FILE__, __LINE__, #hay, (hay), (needle), true)
#define CHECK_NOT_CONTAINS(hay, needle)                                                            \
    tcheck_contains(__FILE__, __LINE__, #hay, (hay), (needle), false)
/* FAIL - an unconditional failure with a printf-style reason. */
#define FAIL(...) tcheck_fail(__FILE__, __LINE__, __VA_ARGS__)

bool tcheck_true(const char *file, int line, const char *expr, bool ok);
bool tcheck_int(const char *file, int line, const char *expr, long long got, long long want);
bool tcheck_str(const char *file, int line, const char *expr, const char *got, const char *want);
bool tcheck_contains(const char *file, int line, const char *expr, const char *hay,
                     const char *needle, bool want);
bool tcheck_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * tcheck_context - a label for this thread's next failures ("case amount=-1"),
 * copied; tcheck_context_clear() removes it.
 */
void tcheck_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tcheck_context_clear(void);

/* tcheck_failures - failures so far, all threads. */
int tcheck_failures(void);

/* TRUN - run one static void test function, announcing it on stdout. */
#define TRUN(fn)                                                                                   \
    do {                                                                                           \
        printf("# %s\n", #fn);                                                                     \
        fflush(stdout);                                                                            \
        tcheck_context_clear();                                                                    \
        fn();                                                                                      \
    } while (0)

/*
 * tcheck_summary - print "name: N checks, M failed"; the exit status for main:
 * 0 when at least one check ran and none failed, else 1. A test that ran no
 * check fails: one that skips returns 77 itself instead of calling this.
 */
int tcheck_summary(const char *name);

#endif
