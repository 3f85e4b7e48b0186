/* tests/admin/tadmin.c - database + vhost per test, the three programs, admin calls, AMQP probes */
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

#include <amqp.h>

#include "shared/log.h"
#include "shared/mq.h"

#define READY_WAIT_MS   20000
#define STOP_WAIT_MS    12000
#define CONFIRM_WAIT_MS 5000

static const char *stack_bin(void)
{
    const char *s = getenv("GW_STACK");

    return (s != NULL && *s != '\0') ? s : NULL;
}

static const char *prog_bin(tadm_kind kind)
{
    const char *var = kind == TADM_RELAY ? "GW_RELAY_BIN" : "GW_WORKER_BIN";
    const char *b = getenv(var);

    if (b == NULL || *b == '\0') {
        fprintf(stderr, "tadmin: %s is not set (meson sets it)\n", var);
        return NULL;
    }
    return b;
}

/* "$GW_STACK vhost @name [--delete]"; its first stdout line into @out (may be NULL). */
static int stack_vhost(const char *name, bool delete, char *out, size_t len)
{
    const char *stack = stack_bin();
    size_t got = 0;
    int fds[2], ws;
    pid_t pid;

    if (stack == NULL || pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (delete)
            execl(stack, stack, "vhost", name, "--delete", (char *)NULL);
        else
            execl(stack, stack, "vhost", name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
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
    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int tadm_init(tadm *t, const char *name)
{
    char url[512];
    int rc = -1;

    memset(t, 0, sizeof *t);
    t->name = name;
    log_init("tadmin", LOG_ERROR, LOG_FORMAT_TEXT); /* the probes' connects are not news */
    if (tdb_admin_url() == NULL) {
        printf("SKIP: GW_TEST_PG_URL is not set\n");
        return 77;
    }
    if (stack_bin() == NULL) {
        printf("SKIP: GW_STACK is not set (each test makes its own vhost with it)\n");
        return 77;
    }
    if (prog_bin(TADM_RELAY) == NULL || prog_bin(TADM_WORKER) == NULL || tapi_bin() == NULL)
        return 1;
    thttp_global_init();
    /* a few tries: another suite may be restarting the shared server right now */
    for (int i = 0; i < 5 && t->db == NULL; i++) {
        if (i > 0)
            tproc_sleep_ms(2000);
        t->db = tdb_create(true);
    }
    if (t->db == NULL)
        return 1;
    snprintf(t->vhost, sizeof t->vhost, "admin-%s-%d", name, (int)getpid());
    for (int i = 0; i < 5; i++) {
        if (i > 0)
            tproc_sleep_ms(2000);
        if ((rc = stack_vhost(t->vhost, false, url, sizeof url)) == 0)
            break;
    }
    if (rc != 0 || strncmp(url, "amqp://", 7) != 0) {
        fprintf(stderr, "tadmin: $GW_STACK vhost %s failed (status %d, output \"%s\")\n", t->vhost,
                rc, url);
        t->vhost[0] = '\0';
        return 1;
    }
    t->amqp_url = strdup(url);
    if (t->amqp_url == NULL)
        abort();
    snprintf(t->amqp_env, sizeof t->amqp_env, "AMQP_URL=%s", url);
    fprintf(stderr, "tadmin: vhost %s: %s\n", t->vhost, url);
    return 0;
}

void tadm_cleanup(tadm *t)
{
    if (t->vhost[0] != '\0' && stack_vhost(t->vhost, true, NULL, 0) != 0)
        fprintf(stderr, "tadmin: could not delete vhost %s\n", t->vhost);
    t->vhost[0] = '\0';
    free(t->amqp_url);
    t->amqp_url = NULL;
    tdb_drop(t->db);
    t->db = NULL;
    thttp_global_cleanup();
}

/* ---------------------------------------------------------------- programs */

/* Poll @base/readyz until 200 while @p runs; false at the deadline. */
static bool wait_ready(tproc *p, const char *base, const char *label)
{
    long long deadline = tproc_now_ms() + READY_WAIT_MS;

    for (;;) {
        thttp_resp r;
        long status;

        thttp_get(base, "/readyz", NULL, &r);
        status = r.status;
        thttp_resp_free(&r);
        if (status == 200)
            return true;
        if (!tproc_running(p) || tproc_now_ms() >= deadline) {
            fprintf(stderr, "tadmin: %s not ready (last /readyz %ld)\n", label, status);
            tproc_print_log_tail(p, 30);
            return false;
        }
        tproc_sleep_ms(25);
    }
}

bool tadm_prog_start(tadm_prog *p, tadm_kind kind, const char *label, const tadm *t,
                     const char *const *extra)
{
    const char *bin = prog_bin(kind);
    const char *env[64];
    char db[1024];
    size_t n = 0;

    memset(p, 0, sizeof *p);
    if (bin == NULL)
        return false;
    for (const char *const *v = tapi_config_vars; *v != NULL; v++)
        env[n++] = *v; /* "KEY": removed */
    snprintf(db, sizeof db, "DATABASE_URL=%s", tdb_url(t->db));
    env[n++] = db;
    env[n++] = t->amqp_env;
    env[n++] = "METRICS_LISTEN=127.0.0.1:0";
    env[n++] = TADM_DELAYS;
    for (const char *const *x = extra; x != NULL && *x != NULL && n < 63; x++)
        env[n++] = *x;
    env[n] = NULL;
    p->proc = tproc_start(bin, env, label);
    if (p->proc == NULL)
        return false;
    p->port = tproc_wait_listening(p->proc, READY_WAIT_MS);
    if (p->port <= 0)
        goto fail;
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->port);
    if (!wait_ready(p->proc, p->url, label))
        goto fail;
    p->failures_at_start = tcheck_failures();
    return true;
fail:
    tproc_free(p->proc);
    p->proc = NULL;
    return false;
}

int tadm_prog_stop(tadm_prog *p)
{
    int status;

    if (p->proc == NULL)
        return -1;
    status = tproc_stop(p->proc, STOP_WAIT_MS);
    tcheck_context("exit status of pid %d after SIGTERM", (int)tproc_pid(p->proc));
    CHECK_INT(status, 0);
    tcheck_context_clear();
    if (tcheck_failures() > p->failures_at_start)
        tproc_print_log_tail(p->proc, 40);
    tproc_free(p->proc);
    p->proc = NULL;
    return status;
}

bool tadm_api_start(tapi *a, const tadm *t, const char *label, const char *const *extra)
{
    const char *env[64];
    size_t n = 0;

    env[n++] = t->amqp_env; /* after tapi_env()'s AMQP_URL: this one wins */
    env[n++] = TADM_DELAYS;
    for (const char *const *x = extra; x != NULL && *x != NULL && n < 63; x++)
        env[n++] = *x;
    env[n] = NULL;
    if (!tapi_start(a, label, tdb_url(t->db), env))
        return false;
    if (!wait_ready(a->proc, a->url, label)) {
        tproc_free(a->proc);
        a->proc = NULL;
        return false;
    }
    a->failures_at_start = tcheck_failures();
    return true;
}

bool tadm_all_start(const tadm *t, tadm_prog *relay, tadm_prog *worker, tapi *api,
                    const char *const *worker_extra)
{
    char label[128];

    memset(relay, 0, sizeof *relay);
    memset(worker, 0, sizeof *worker);
    memset(api, 0, sizeof *api);
    snprintf(label, sizeof label, "%s-relay", t->name);
    if (!tadm_prog_start(relay, TADM_RELAY, label, t, NULL))
        return false;
    snprintf(label, sizeof label, "%s-worker", t->name);
    if (!tadm_prog_start(worker, TADM_WORKER, label, t, worker_extra))
        return false;
    snprintf(label, sizeof label, "%s-api", t->name);
    return tadm_api_start(api, t, label, NULL);
}

void tadm_all_stop(tadm_prog *relay, tadm_prog *worker, tapi *api)
{
    if (api != NULL && api->proc != NULL)
        tapi_stop(api);
    if (worker != NULL)
        tadm_prog_stop(worker);
    if (relay != NULL)
        tadm_prog_stop(relay);
}

/* ---------------------------------------------------------------- HTTP */

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

json_t *tadm_letter_for(const json_t *letters, const char *event_id)
{
    size_t i;
    json_t *l;

    json_array_foreach(letters, i, l)
    {
        const char *e = json_string_value(json_object_get(l, "event_id"));
        if (e != NULL && strcmp(e, event_id) == 0)
            return l;
    }
    return NULL;
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

long long tadm_wait_long(tdb *db, const char *sql, long long want, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    long long v;

    for (;;) {
        v = tdb_long(db, sql, NULL);
        if (v == want || tproc_now_ms() >= deadline)
            return v;
        tproc_sleep_ms(25);
    }
}

char *tadm_status(tdb *db, const char *payment_id)
{
    return tdb_value(db, "SELECT status FROM payments WHERE payment_id = $1", payment_id, NULL);
}

/* ---------------------------------------------------------------- RabbitMQ */

static long depth_of(const tadm *t, const char *queue, bool quiet)
{
    amqp_queue_declare_ok_t *ok;
    amqp_rpc_reply_t r;
    mq_conn *c = NULL;
    long depth = -1;

    if (mq_open(t->amqp_url, "admin-test-probe", false, &c) != GW_OK) {
        if (!quiet)
            fprintf(stderr, "tadmin: cannot connect to %s\n", t->amqp_url);
        return -1;
    }
    ok = amqp_queue_declare(mq_state(c), MQ_CHANNEL, mq_bytes(queue), 1 /* passive */, 0, 0, 0,
                            amqp_empty_table);
    r = amqp_get_rpc_reply(mq_state(c));
    if (ok != NULL && r.reply_type == AMQP_RESPONSE_NORMAL)
        depth = (long)ok->message_count;
    else if (!quiet)
        fprintf(stderr, "tadmin: queue.declare passive %s failed\n", queue);
    mq_close(c);
    return depth;
}

long tadm_depth(const tadm *t, const char *queue)
{
    return depth_of(t, queue, false);
}

long tadm_wait_depth(const tadm *t, const char *queue, long want, int timeout_ms)
{
    long long deadline = tproc_now_ms() + timeout_ms;
    long v;

    for (;;) {
        v = depth_of(t, queue, true);
        if (v == want)
            return v;
        if (tproc_now_ms() >= deadline)
            return tadm_depth(t, queue); /* once more, saying why when it fails */
        tproc_sleep_ms(50);
    }
}

bool tadm_publish(const tadm *t, const tadm_raw *m)
{
    amqp_basic_properties_t p;
    amqp_table_entry_t h[1];
    amqp_bytes_t body = {m->len, (void *)m->body};
    long long deadline;
    mq_conn *c = NULL;
    bool acked = false, returned = false;

    if (mq_open(t->amqp_url, "admin-test-publisher", true, &c) != GW_OK) {
        fprintf(stderr, "tadmin: cannot connect to %s\n", t->amqp_url);
        return false;
    }
    memset(&p, 0, sizeof p);
    p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    p.delivery_mode = 2;
    if (m->message_id != NULL) {
        p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
        p.message_id = mq_bytes(m->message_id);
        p.content_type = mq_bytes("application/json");
    }
    if (m->attempt > 0) {
        h[0].key = mq_bytes("x-attempt");
        h[0].value.kind = AMQP_FIELD_KIND_I64;
        h[0].value.value.i64 = m->attempt;
        p._flags |= AMQP_BASIC_HEADERS_FLAG;
        p.headers.num_entries = 1;
        p.headers.entries = h;
    }
    if (amqp_basic_publish(mq_state(c), MQ_CHANNEL, mq_bytes(m->exchange), mq_bytes(m->routing_key),
                           1 /* mandatory */, 0, &p, body) != AMQP_STATUS_OK) {
        fprintf(stderr, "tadmin: basic.publish failed\n");
        mq_close(c);
        return false;
    }
    deadline = tproc_now_ms() + CONFIRM_WAIT_MS;
    while (!acked && tproc_now_ms() < deadline) {
        mq_event ev;
        gw_err err = mq_next_event(c, (int)(deadline - tproc_now_ms()) + 1, &ev);

        if (err == GW_ERR_RETRY)
            continue;
        if (err != GW_OK)
            break;
        if (ev.kind == MQ_EV_RETURN)
            returned = true;
        else if (ev.kind == MQ_EV_ACK)
            acked = true;
        else if (ev.kind == MQ_EV_NACK)
            break;
    }
    mq_close(c);
    if (!acked || returned)
        fprintf(stderr, "tadmin: publish to %s/%s: %s\n", m->exchange, m->routing_key,
                returned ? "returned unroutable" : "not confirmed");
    return acked && !returned;
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
