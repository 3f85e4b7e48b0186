/* tests/admin/tadmin.c - the admin tests' layer over te2e and tmq: the API, admin calls, checks */
#include "tests/admin/tadmin.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

bool tadm_prog_start(tprog *p, tprog_kind kind, const char *label, const te2e *t,
                     const char *const *extra)
{
    const char *env[64];
    size_t n = 0;

    env[n++] = TADM_DELAYS;
    for (const char *const *x = extra; x != NULL && *x != NULL && n < 63; x++)
        env[n++] = *x;
    env[n] = NULL;
    return tprog_start(p, kind, label, t, env);
}

bool tadm_api_start(tapi *a, const te2e *t, const char *label, const char *const *extra)
{
    char amqp[600];
    const char *env[64];
    size_t n = 0;

    snprintf(amqp, sizeof amqp, "AMQP_URL=%s", t->amqp_url);
    env[n++] = amqp; /* after tapi_env()'s AMQP_URL: this one wins */
    env[n++] = TADM_DELAYS;
    for (const char *const *x = extra; x != NULL && *x != NULL && n < 63; x++)
        env[n++] = *x;
    env[n] = NULL;
    if (!tapi_start(a, label, tdb_url(t->db), env))
        return false;
    if (!te2e_wait_ready(a->proc, a->url, label)) {
        tproc_free(a->proc);
        a->proc = NULL;
        return false;
    }
    a->failures_at_start = tcheck_failures();
    return true;
}

bool tadm_all_start(const te2e *t, tprog *relay, tprog *worker, tapi *api,
                    const char *const *worker_extra)
{
    char label[128];

    memset(relay, 0, sizeof *relay);
    memset(worker, 0, sizeof *worker);
    memset(api, 0, sizeof *api);
    snprintf(label, sizeof label, "%s-relay", t->name);
    if (!tadm_prog_start(relay, TPROG_RELAY, label, t, NULL))
        return false;
    snprintf(label, sizeof label, "%s-worker", t->name);
    if (!tadm_prog_start(worker, TPROG_WORKER, label, t, worker_extra))
        return false;
    snprintf(label, sizeof label, "%s-api", t->name);
    return tadm_api_start(api, t, label, NULL);
}

void tadm_all_stop(tprog *relay, tprog *worker, tapi *api)
{
    if (api != NULL && api->proc != NULL)
        tapi_stop(api);
    if (worker != NULL)
        tprog_stop(worker, 0);
    if (relay != NULL)
        tprog_stop(relay, 0);
}

struct tadm_run {
    te2e *t;
    tprog *relay, *worker;
    tapi *api;
    const char *const *worker_extra;
    void (*tests)(void);
};

static void run_all(void *arg)
{
    const struct tadm_run *r = arg;

    if (CHECK(tadm_all_start(r->t, r->relay, r->worker, r->api, r->worker_extra)))
        r->tests();
    tadm_all_stop(r->relay, r->worker, r->api);
}

int tadm_main(const char *name, te2e *t, tprog *relay, tprog *worker, tapi *api,
              const char *const *worker_extra, void (*tests)(void))
{
    struct tadm_run r = {t, relay, worker, api, worker_extra, tests};

    return te2e_main_arg(name, t, run_all, &r);
}

/* ---------------------------------------------------------------- HTTP */

bool tadm_check_unauthorized_at(const char *file, int line, const tapi *a, const char *method,
                                const char *path, const char *token, bool bearer)
{
    thttp_resp r;
    bool ok;

    tadm_call(a, method, path, token, &r);
    ok = tapi_check_problem_at(file, line, &r, 401, "unauthorized");
    if (bearer)
        ok &= tcheck_str(file, line, "WWW-Authenticate", thttp_header(&r, "WWW-Authenticate"),
                         "Bearer");
    thttp_resp_free(&r);
    return ok;
}

bool tadm_call(const tapi *a, const char *method, const char *path, const char *token,
               thttp_resp *out)
{
    const char *headers[2] = {NULL, NULL};
    char url[512], auth[256];

    snprintf(url, sizeof url, "%s%s", a->url, path);
    if (token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        headers[0] = auth;
    }
    return thttp_request(method, url, headers, strcmp(method, "POST") == 0 ? "" : NULL, 0, out);
}

bool tadm_admin(const tapi *a, const char *method, const char *path, thttp_resp *out)
{
    return tadm_call(a, method, path, TAPI_ADMIN_TOKEN, out);
}

char *tadm_payment_json(const char *event_id, const char *payment_id, const char *method,
                        const char *decision, long long amount, const char *bank,
                        const char *account)
{
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:{s:s, s:s}}", "event_id", event_id,
                  "payment_id", payment_id, "method", method, "decision", decision, "amount_cents",
                  (json_int_t)amount, "currency", "BRL", "payee", "bank", bank, "account", account);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

    json_decref(o);
    if (s == NULL)
        abort();
    return s;
}

bool tadm_accept(const tapi *a, const char *event_id, const char *payment_id, const char *method,
                 const char *decision, long long amount, const char *bank, const char *account,
                 char **json)
{
    char *body = tadm_payment_json(event_id, payment_id, method, decision, amount, bank, account);
    thttp_resp r;
    bool ok;

    tapi_post(a, body, NULL, &r);
    tcheck_context("accept %s", event_id);
    ok = CHECK_INT(r.status, 202);
    tcheck_context_clear();
    if (!ok)
        fprintf(stderr, "    body: %s (curl: %s)\n", r.body, r.error);
    thttp_resp_free(&r);
    if (json != NULL)
        *json = body;
    else
        free(body);
    return ok;
}

bool tadm_drain(const tapi *a, int max, thttp_resp *out)
{
    char path[64];
    bool ok;

    if (max > 0)
        snprintf(path, sizeof path, "/admin/dlq/drain?max=%d", max);
    else
        snprintf(path, sizeof path, "/admin/dlq/drain");
    tadm_admin(a, "POST", path, out);
    tcheck_context("POST %s", path);
    ok = CHECK_INT(out->status, 200) && CHECK(json_is_object(out->json)) &&
         CHECK(json_is_integer(json_object_get(out->json, "drained"))) &&
         CHECK(json_is_array(json_object_get(out->json, "messages")));
    tcheck_context_clear();
    if (!ok)
        fprintf(stderr, "    body: %.800s (curl: %s)\n", out->body, out->error);
    return ok;
}

json_t *tadm_find(const json_t *array, const char *key, const char *value)
{
    size_t i;
    json_t *o;

    json_array_foreach(array, i, o)
    {
        const char *v = json_string_value(json_object_get(o, key));
        if (v != NULL && strcmp(v, value) == 0)
            return o;
    }
    return NULL;
}

json_t *tadm_letter_for(const json_t *letters, const char *event_id)
{
    return tadm_find(letters, "event_id", event_id);
}

long long tadm_id(const json_t *letter)
{
    const json_t *v = json_object_get(letter, "id");

    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static bool digits(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int num(const char *s, int n)
{
    int v = 0;

    for (int i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

bool tadm_is_date_time(const char *s)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, max;

    /* YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM) */
    if (s == NULL || strlen(s) < 20 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) ||
        s[7] != '-' || !digits(s + 8, 2) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2) ||
        s[13] != ':' || !digits(s + 14, 2) || s[16] != ':' || !digits(s + 17, 2))
        return false;
    y = num(s, 4);
    mo = num(s + 5, 2);
    d = num(s + 8, 2);
    if (mo < 1 || mo > 12)
        return false;
    max = days[mo - 1] + (mo == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0));
    if (d < 1 || d > max || num(s + 11, 2) > 23 || num(s + 14, 2) > 59 || num(s + 17, 2) > 60)
        return false;
    s += 19;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if ((*s == 'Z' || *s == 'z') && s[1] == '\0')
        return true;
    return (*s == '+' || *s == '-') && digits(s + 1, 2) && s[3] == ':' && digits(s + 4, 2) &&
           s[6] == '\0' && num(s + 1, 2) <= 23 && num(s + 4, 2) <= 59;
}

const char *tadm_dump(const json_t *j)
{
    static _Thread_local char bufs[4][1200];
    static _Thread_local unsigned next;
    char *buf = bufs[next++ % 4];
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

    snprintf(buf, sizeof bufs[0], "%s", s != NULL ? s : "(null)");
    free(s);
    return buf;
}

/* ---------------------------------------------------------------- PostgreSQL */

char *tadm_status(tdb *db, const char *payment_id)
{
    return tdb_value(db, "SELECT status FROM payments WHERE payment_id = $1", payment_id, NULL);
}

/* ---------------------------------------------------------------- RabbitMQ */

long tadm_depth(const te2e *t, const char *queue)
{
    tmq *m = tmq_connect(t->amqp_url);
    long depth = m != NULL ? tmq_depth(m, queue) : -1;

    tmq_close(m);
    return depth;
}

long tadm_wait_depth(const te2e *t, const char *queue, long want, int timeout_ms)
{
    tmq *m = tmq_connect(t->amqp_url);
    long depth = m != NULL ? tmq_wait_depth(m, queue, want, timeout_ms) : -1;

    tmq_close(m);
    return depth;
}

bool tadm_publish(const te2e *t, const tmq_pub *p)
{
    tmq *m = tmq_connect(t->amqp_url);
    int rc = m != NULL ? tmq_publish(m, p) : -1;

    tmq_close(m);
    if (rc != 1)
        fprintf(stderr, "tadmin: publish to %s/%s: %s\n", p->exchange, p->routing_key,
                rc == 0 ? "returned unroutable" : "not confirmed");
    return rc == 1;
}

/* ---------------------------------------------------------------- other programs */

/* The child's side of tadm_run(): never returns. */
static void run_child(const char *const *argv, const char *const *env, int out_fd)
{
    pid_t parent = getppid();
    int devnull;

    setpgid(0, 0); /* a group of its own: a timeout kills npm and everything it started */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
        _exit(127);
    for (const char *const *e = env; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        char key[128];

        if (eq == NULL) {
            unsetenv(*e);
        } else if ((size_t)(eq - *e) < sizeof key) {
            memcpy(key, *e, (size_t)(eq - *e));
            key[eq - *e] = '\0';
            setenv(key, eq + 1, 1);
        }
    }
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[0], (char *const *)argv);
    dprintf(2, "tadmin: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int tadm_run(const char *const *argv, const char *const *env, int timeout_ms, char **out)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    bool timed_out = false, exited = false;
    int fds[2], ws = 0;
    pid_t pid;

    if (out != NULL)
        *out = NULL;
    if (buf == NULL || pipe2(fds, O_CLOEXEC) != 0) {
        free(buf);
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        run_child(argv, env, fds[1]);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        free(buf);
        return -1;
    }
    setpgid(pid, pid); /* also here: no race with the kill below */
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        long long left = deadline - tproc_now_ms();
        ssize_t r;

        if (left <= 0) {
            timed_out = true;
            break;
        }
        if (poll(&p, 1, (int)(left > 200 ? 200 : left)) <= 0) {
            /* a grandchild may keep the pipe open after the child is gone */
            if (exited)
                break;
            exited = waitpid(pid, &ws, WNOHANG) == pid;
            continue;
        }
        if (cap - len < 1024) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL)
                break;
            buf = nb;
            cap *= 2;
        }
        r = read(fds[0], buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* EOF: every writer is gone */
        len += (size_t)r;
    }
    close(fds[0]);
    buf[len] = '\0';
    if (timed_out) {
        fprintf(stderr, "tadmin: %s still running after %d ms; SIGKILL\n", argv[0], timeout_ms);
        kill(-pid, SIGKILL);
    }
    while (!exited && waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (out != NULL)
        *out = buf;
    else
        free(buf);
    if (timed_out)
        return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* ---------------------------------------------------------------- base64 */

char *tadm_base64(const void *data, size_t len)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *in = data;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;

    if (out == NULL)
        abort();
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        size_t left = len - i;

        if (left > 1)
            v |= (unsigned)in[i + 1] << 8;
        if (left > 2)
            v |= in[i + 2];
        *o++ = abc[(v >> 18) & 63];
        *o++ = abc[(v >> 12) & 63];
        *o++ = left > 1 ? abc[(v >> 6) & 63] : '=';
        *o++ = left > 2 ? abc[v & 63] : '=';
    }
    *o = '\0';
    return out;
}
