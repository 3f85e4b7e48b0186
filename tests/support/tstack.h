/* tests/support/tstack.h - scripts/stack for the tests ($GW_STACK): vhosts, restarts, a guard */
#ifndef TESTS_SUPPORT_TSTACK_H
#define TESTS_SUPPORT_TSTACK_H

#include <sys/types.h>

/* tstack_bin - $GW_STACK, or NULL when it is not set (the caller says SKIP). */
const char *tstack_bin(void);

/*
 * tstack_run - "$GW_STACK @verb @what" (stop/start broker/db), its output on
 * our stderr; its exit status (-1 when it could not run).
 */
int tstack_run(const char *verb, const char *what);

/*
 * A guard: a process outside our process group that runs "$GW_STACK start
 * @what" if this test dies first (a crash, or meson's timeout killing the
 * group). It waits for one byte on a pipe; end-of-file without it means the
 * test is gone. tstack_guard_start returns its pid (-1 on failure) and the
 * pipe in *@done_fd; tstack_guard_done() dismisses it once the test started
 * the server again itself.
 */
pid_t tstack_guard_start(const char *what, int *done_fd);
/* tstack_guard_cmd - the same guard, running "$GW_STACK @args..." (NULL-terminated, < 15). */
pid_t tstack_guard_cmd(const char *const *args, int *done_fd);
void tstack_guard_done(pid_t guard, int done_fd);

/*
 * tstack_capture - run "$GW_STACK @args..." (NULL-terminated, fewer than 15);
 * the first line of its stdout in @out (may be NULL), its stderr on ours. Its
 * exit status, -1 when it could not run.
 */
int tstack_capture(const char *const *args, char *out, size_t len);

/*
 * tstack_vhost_create - "$GW_STACK vhost @name": a new vhost for guest; its
 * AMQP URL as a new string (free()), NULL after printing why.
 * tstack_vhost_delete - "$GW_STACK vhost @name --delete" (best effort).
 */
char *tstack_vhost_create(const char *name);
void tstack_vhost_delete(const char *name);

#endif
