/* tests/support/tproc.c - fork/exec, a log file per child, deadlines instead of sleeps */
#include "tests/support/tproc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct tproc {
    pid_t pid;
    bool exited;
    int status; /* valid when exited: exit code, or 128 + signal */
    char log_path[512];
};

long long tproc_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tproc_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

const char *tproc_tmpdir(void)
{
    static char dir[400];
    const char *d = getenv("GW_TEST_TMP");

    if (d == NULL || *d == '\0')
        return "/tmp";
    if (dir[0] == '\0') {
        snprintf(dir, sizeof dir, "%s", d);
        /* mkdir -p of the last two levels is enough: the build dir exists */
        char parent[400];
        snprintf(parent, sizeof parent, "%s", d);
        char *slash = strrchr(parent, '/');
        if (slash != NULL && slash != parent) {
            *slash = '\0';
            (void)mkdir(parent, 0755);
        }
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "tproc: cannot create %s: %s; using /tmp\n", dir, strerror(errno));
            snprintf(dir, sizeof dir, "/tmp");
        }
    }
    return dir;
}

/* A new NULL-terminated environment: environ changed by @env (see tproc.h). Owned strings. */
static char **build_env(const char *const *env)
{
    size_t n = 0, extra = 0, cap;
    char **out;

    while (environ[n] != NULL)
        n++;
    for (const char *const *e = env; e != NULL && *e != NULL; e++)
        extra++;
    cap = n + extra + 1;
    out = calloc(cap, sizeof *out);
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = strdup(environ[i]);
    for (const char *const *e = env; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        size_t klen = eq ? (size_t)(eq - *e) : strlen(*e);
        size_t w = 0;

        /* drop every existing KEY=, then append the new value if any */
        for (size_t i = 0; i < n; i++) {
            if (out[i] != NULL && strncmp(out[i], *e, klen) == 0 && out[i][klen] == '=') {
                free(out[i]);
                out[i] = NULL;
            }
        }
        for (size_t i = 0; i < n; i++)
            if (out[i] != NULL)
                out[w++] = out[i];
        for (size_t i = w; i < n; i++)
            out[i] = NULL;
        n = w;
        if (eq != NULL)
            out[n++] = strdup(*e);
    }
    out[n] = NULL;
    return out;
}

static void free_env(char **env)
{
    if (env == NULL)
        return;
    for (char **e = env; *e != NULL; e++)
        free(*e);
    free(env);
}

static int decode_status(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return -1;
}

/* fork + exec @bin with @envp, stdin /dev/null, stdout to @out_fd, stderr to @err_fd. */
static pid_t spawn(const char *bin, char **envp, int out_fd, int err_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();

    if (pid != 0)
        return pid; /* the parent, or -1 */
    /* the child: nothing here may return */
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a dead test leaves no daemon behind */
    if (getppid() != parent)
        _exit(127);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(127);
    /* the test blocks no signals, but be explicit: the program expects a clean mask */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    char *argv[] = {(char *)bin, NULL};
    execve(bin, argv, envp);
    dprintf(2, "tproc: exec %s: %s\n", bin, strerror(errno));
    _exit(127);
}

tproc *tproc_start(const char *bin, const char *const *env, const char *label)
{
    static atomic_int seq;
    tproc *p = calloc(1, sizeof *p);
    char **envp = NULL;
    int fd = -1;

    if (p == NULL)
        return NULL;
    snprintf(p->log_path, sizeof p->log_path, "%s/%s-%d-%d.log", tproc_tmpdir(), label,
             (int)getpid(), atomic_fetch_add(&seq, 1));
    fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    envp = build_env(env);
    if (fd < 0 || envp == NULL) {
        fprintf(stderr, "tproc: cannot open %s: %s\n", p->log_path, strerror(errno));
        goto fail;
    }
    fflush(NULL); /* nothing buffered is written twice by the child */
    p->pid = spawn(bin, envp, fd, fd);
    if (p->pid < 0) {
        fprintf(stderr, "tproc: fork: %s\n", strerror(errno));
        goto fail;
    }
    close(fd);
    free_env(envp);
    fprintf(stderr, "tproc: started %s pid %d, log %s\n", bin, (int)p->pid, p->log_path);
    return p;
fail:
    if (fd >= 0)
        close(fd);
    free_env(envp);
    free(p);
    return NULL;
}

pid_t tproc_pid(const tproc *p)
{
    return p->pid;
}

const char *tproc_log_path(const tproc *p)
{
    return p->log_path;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL)
        return NULL;
    for (;;) {
        if (cap - len < 4096) {
            char *nb = realloc(buf, cap + 65536);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
            cap += 65536;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

char *tproc_log(const tproc *p)
{
    return read_file(p->log_path);
}

bool tproc_log_contains(const tproc *p, const char *needle)
{
    char *log = read_file(p->log_path);
    bool found = log != NULL && strstr(log, needle) != NULL;

    free(log);
    return found;
}

int tproc_log_count(const tproc *p, const char *needle)
{
    char *log = read_file(p->log_path);
    int n = 0;

    for (const char *s = log ? strstr(log, needle) : NULL; s != NULL; s = strstr(s + 1, needle))
        n++;
    free(log);
    return n;
}

void tproc_signal(tproc *p, int sig)
{
    if (tproc_running(p))
        kill(p->pid, sig);
}

bool tproc_running(tproc *p)
{
    int ws;
    pid_t r;

    if (p->exited)
        return false;
    r = waitpid(p->pid, &ws, WNOHANG);
    if (r == p->pid) {
        p->exited = true;
        p->status = decode_status(ws);
        return false;
    }
    return true;
}

void tproc_print_log_tail(const tproc *p, int lines)
{
    char *log = read_file(p->log_path);
    size_t i;
    int seen = 0;

    if (log == NULL) {
        fprintf(stderr, "tproc: cannot read %s\n", p->log_path);
        return;
    }
    i = strlen(log);
    if (i > 0 && log[i - 1] == '\n')
        i--;
    for (; i > 0; i--)
        if (log[i - 1] == '\n' && ++seen >= lines)
            break;
    fprintf(stderr, "---- last %d lines of %s (pid %d) ----\n%s%s---- end ----\n", lines,
            p->log_path, (int)p->pid, log + i,
            (log[i] != '\0' && log[strlen(log) - 1] != '\n') ? "\n" : "");
    free(log);
}

/* The port of an event=listening line (text or JSON), -1 when there is none yet. */
static int listening_port(const char *log)
{
    for (const char *line = log; line != NULL && *line; line = strchr(line, '\n')) {
        const char *end, *port;

        if (*line == '\n')
            line++;
        end = strchr(line, '\n');
        if (end == NULL)
            return -1; /* a line still being written */
        if (!((strstr(line, "event=listening ") != NULL &&
               strstr(line, "event=listening ") < end) ||
              (strstr(line, "\"event\":\"listening\"") != NULL &&
               strstr(line, "\"event\":\"listening\"") < end)))
            continue;
        port = strstr(line, " port=");
        if (port != NULL && port < end)
            return atoi(port + 6);
        port = strstr(line, "\"port\":");
        if (port != NULL && port < end)
            return atoi(port + 7 + (port[7] == '"'));
    }
    return -1;
}

int tproc_wait_listening(tproc *p, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;

    for (;;) {
        char *log = read_file(p->log_path);
        int port = log ? listening_port(log) : -1;

        free(log);
        if (port > 0)
            return port;
        if (!tproc_running(p)) {
            fprintf(stderr, "tproc: pid %d exited with status %d before listening\n", (int)p->pid,
                    p->status);
            tproc_print_log_tail(p, 30);
            return -1;
        }
        if (tproc_now_ms() >= deadline) {
            fprintf(stderr, "tproc: pid %d did not log event=listening within %d ms\n", (int)p->pid,
                    timeout_ms);
            tproc_print_log_tail(p, 30);
            return -1;
        }
        tproc_sleep_ms(20);
    }
}

bool tproc_wait_log(tproc *p, const char *needle, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;

    for (;;) {
        if (tproc_log_contains(p, needle))
            return true;
        if (tproc_now_ms() >= deadline) {
            fprintf(stderr, "tproc: \"%s\" not in the log of pid %d within %d ms\n", needle,
                    (int)p->pid, timeout_ms);
            tproc_print_log_tail(p, 30);
            return false;
        }
        tproc_sleep_ms(20);
    }
}

int tproc_wait_exit(tproc *p, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;

    while (tproc_running(p)) {
        if (tproc_now_ms() >= deadline)
            return -1;
        tproc_sleep_ms(10);
    }
    return p->status;
}

int tproc_stop(tproc *p, int timeout_ms)
{
    int status;

    if (!tproc_running(p))
        return p->status;
    kill(p->pid, SIGTERM);
    status = tproc_wait_exit(p, timeout_ms);
    if (status == -1) {
        fprintf(stderr, "tproc: pid %d still running %d ms after SIGTERM; SIGKILL\n", (int)p->pid,
                timeout_ms);
        kill(p->pid, SIGKILL);
        (void)tproc_wait_exit(p, 5000);
        tproc_print_log_tail(p, 30);
        return -1;
    }
    return status;
}

void tproc_free(tproc *p)
{
    if (p == NULL)
        return;
    if (tproc_running(p)) {
        kill(p->pid, SIGKILL);
        (void)tproc_wait_exit(p, 5000);
    }
    free(p);
}

int tproc_run(const char *bin, const char *const *env, int timeout_ms, char **err)
{
    static atomic_int seq;
    char path[512];
    char **envp = build_env(env);
    int fd, devnull, status;
    tproc p = {0};

    *err = NULL;
    snprintf(path, sizeof path, "%s/run-%d-%d.stderr", tproc_tmpdir(), (int)getpid(),
             atomic_fetch_add(&seq, 1));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (envp == NULL || fd < 0 || devnull < 0) {
        fprintf(stderr, "tproc: cannot open %s: %s\n", path, strerror(errno));
        free_env(envp);
        if (fd >= 0)
            close(fd);
        if (devnull >= 0)
            close(devnull);
        return -1;
    }
    fflush(NULL);
    p.pid = spawn(bin, envp, devnull, fd);
    close(fd);
    close(devnull);
    free_env(envp);
    if (p.pid < 0)
        return -1;
    snprintf(p.log_path, sizeof p.log_path, "%s", path);
    status = tproc_wait_exit(&p, timeout_ms);
    if (status == -1) {
        fprintf(stderr, "tproc: %s still running after %d ms; SIGKILL\n", bin, timeout_ms);
        kill(p.pid, SIGKILL);
        (void)tproc_wait_exit(&p, 5000);
        tproc_print_log_tail(&p, 30);
    }
    *err = read_file(path);
    if (*err == NULL)
        *err = strdup("");
    unlink(path);
    return status;
}
