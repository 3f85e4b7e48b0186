/* tests/support/tstack.c - the tests' one way to run scripts/stack; every child is waited for */
#include "tests/support/tstack.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/tproc.h"

const char *tstack_bin(void)
{
    const char *s = getenv("GW_STACK");

    return (s != NULL && *s != '\0') ? s : NULL;
}

static int wait_status(pid_t pid)
{
    int ws;

    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int tstack_run(const char *verb, const char *what)
{
    const char *stack = tstack_bin();
    long long t0 = tproc_now_ms();
    pid_t pid;
    int status;

    if (stack == NULL)
        return -1;
    fprintf(stderr, "tstack: running %s %s %s\n", stack, verb, what);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        dup2(2, 1);
        execl(stack, stack, verb, what, (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    status = wait_status(pid);
    fprintf(stderr, "tstack: %s %s: %lld ms\n", verb, what, tproc_now_ms() - t0);
    return status;
}

/* stack_argv - "$GW_STACK" then @args (NULL-terminated, fewer than 15) into @argv. */
static void stack_argv(const char *stack, const char *const *args, const char *argv[16])
{
    int n = 0;

    argv[n++] = stack;
    for (; args[n - 1] != NULL && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
}

/*
 * fork_piped - fork() with the pipe @fds open in both: the parent closes the
 * child's end @fds[@child_end], and on failure its own end too. fork()'s result.
 */
static pid_t fork_piped(int fds[2], int child_end)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0)
        return 0;
    close(fds[child_end]);
    if (pid < 0)
        close(fds[1 - child_end]);
    return pid;
}

pid_t tstack_guard_start(const char *what, int *done_fd)
{
    const char *args[] = {"start", what, NULL};

    return tstack_guard_cmd(args, done_fd);
}

pid_t tstack_guard_cmd(const char *const *args, int *done_fd)
{
    const char *stack = tstack_bin();
    const char *argv[16];
    int fds[2];
    pid_t pid;

    *done_fd = -1;
    stack_argv(stack, args, argv);
    if (stack == NULL || pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid = fork_piped(fds, 0);
    if (pid == 0) {
        char c;
        ssize_t r;

        setsid(); /* out of the test's process group: meson's timeout kill must not reach us */
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        close(fds[1]);
        do
            r = read(fds[0], &c, 1);
        while (r < 0 && errno == EINTR);
        if (r == 1)
            _exit(0); /* the test undid it itself */
        execv(stack, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    *done_fd = fds[1];
    return pid;
}

void tstack_guard_done(pid_t guard, int done_fd)
{
    if (guard <= 0)
        return;
    if (write(done_fd, "x", 1) != 1)
        fprintf(stderr, "tstack: guard: write failed: %s\n", strerror(errno));
    close(done_fd);
    waitpid(guard, NULL, 0);
}

int tstack_capture(const char *const *args, char *out, size_t len)
{
    const char *stack = tstack_bin();
    const char *argv[16];
    size_t got = 0;
    int fds[2];
    pid_t pid;

    if (out != NULL)
        out[0] = '\0';
    if (stack == NULL) {
        fprintf(stderr, "tstack: GW_STACK is not set\n");
        return -1;
    }
    stack_argv(stack, args, argv);
    if (pipe(fds) != 0)
        return -1;
    pid = fork_piped(fds, 1);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(stack, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    for (;;) {
        char buf[256];
        ssize_t r = read(fds[0], buf, sizeof buf);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; out != NULL && i < r && got + 1 < len; i++)
            out[got++] = buf[i];
    }
    close(fds[0]);
    if (out != NULL) {
        out[got] = '\0';
        out[strcspn(out, "\r\n")] = '\0';
    }
    return wait_status(pid);
}

/* Run "$GW_STACK vhost @name [--delete]"; its first stdout line in @out (may be NULL). */
static int run_vhost(const char *name, bool delete, char *out, size_t len)
{
    const char *args[] = {"vhost", name, delete ? "--delete" : NULL, NULL};

    return tstack_capture(args, out, len);
}

char *tstack_vhost_create(const char *name)
{
    char url[512];
    int rc = run_vhost(name, false, url, sizeof url);
    char *copy;

    if (rc != 0 || strncmp(url, "amqp://", 7) != 0) {
        fprintf(stderr, "tstack: $GW_STACK vhost %s failed (status %d, output \"%s\")\n", name, rc,
                url);
        return NULL;
    }
    fprintf(stderr, "tstack: created vhost %s: %s\n", name, url);
    copy = strdup(url);
    if (copy == NULL)
        abort();
    return copy;
}

void tstack_vhost_delete(const char *name)
{
    int rc = run_vhost(name, true, NULL, 0);

    if (rc != 0)
        fprintf(stderr, "tstack: $GW_STACK vhost %s --delete: status %d\n", name, rc);
}
