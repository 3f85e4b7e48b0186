/* tests/support/tproc.h - run the built programs as child processes with their own environment */
#ifndef TESTS_SUPPORT_TPROC_H
#define TESTS_SUPPORT_TPROC_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct tproc tproc;

/*
 * The environment of a child is the test's own, changed by @env in order:
 * "KEY=VALUE" sets KEY, "KEY" (no '=') removes it. @env is NULL-terminated
 * and may be NULL. Strings are borrowed for the call only.
 */

/*
 * tproc_start - fork and exec @bin with the environment above; stdout and
 * stderr go to a new log file named after @label under $GW_TEST_TMP (or /tmp).
 * The child gets SIGKILL if the test process dies. Returns a handle owned by
 * the caller (tproc_free()), NULL when the fork or the log file failed.
 */
tproc *tproc_start(const char *bin, const char *const *env, const char *label);

/*
 * tproc_wait_listening - wait up to @timeout_ms for a log line with
 * event=listening (text or JSON logs) and return its port, or -1 (the
 * program exited or the deadline passed; the log tail is printed).
 */
int tproc_wait_listening(tproc *p, int timeout_ms);

/* tproc_wait_log - wait up to @timeout_ms until the log contains @needle. */
bool tproc_wait_log(tproc *p, const char *needle, int timeout_ms);

/* tproc_log_contains - whether the log contains @needle now. */
bool tproc_log_contains(const tproc *p, const char *needle);

/* tproc_log_count - how many times @needle occurs in the log now. */
int tproc_log_count(const tproc *p, const char *needle);

/* tproc_log - the whole log as a new string (free()), NULL when unreadable. */
char *tproc_log(const tproc *p);

pid_t tproc_pid(const tproc *p);
const char *tproc_log_path(const tproc *p);

/* tproc_running - whether the child has not exited yet (reaps it when it has). */
bool tproc_running(tproc *p);

/*
 * tproc_wait_exit - wait up to @timeout_ms for the child to exit by itself.
 * Returns its exit status, 128 + the signal number when a signal ended it,
 * or -1 when it is still running at the deadline.
 */
int tproc_wait_exit(tproc *p, int timeout_ms);

/*
 * tproc_stop - SIGTERM, then wait up to @timeout_ms. Returns the status as
 * tproc_wait_exit() does; when the deadline passes the child gets SIGKILL,
 * the log tail is printed and the result is -1.
 */
int tproc_stop(tproc *p, int timeout_ms);

/* tproc_signal - send @sig to the child if it still runs. */
void tproc_signal(tproc *p, int sig);

/* tproc_print_log_tail - the last @lines lines of the log on stderr. */
void tproc_print_log_tail(const tproc *p, int lines);

/* tproc_free - SIGKILL the child if it still runs, reap it, free @p. Accepts NULL. */
void tproc_free(tproc *p);

/*
 * tproc_run - run @bin to its exit (at most @timeout_ms, then SIGKILL and -1)
 * with the environment above and stdin from /dev/null. Its stderr is returned
 * in *@err as a new string (free()); stdout is discarded. Returns the status
 * as tproc_wait_exit() does.
 */
int tproc_run(const char *bin, const char *const *env, int timeout_ms, char **err);

/* tproc_tmpdir - $GW_TEST_TMP (created when missing) or /tmp. Borrowed. */
const char *tproc_tmpdir(void);

/* tproc_now_ms - a monotonic clock in milliseconds, for deadlines. */
long long tproc_now_ms(void);

/* tproc_sleep_ms - a short pause between polls. */
void tproc_sleep_ms(int ms);

#endif
