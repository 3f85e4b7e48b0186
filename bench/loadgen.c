/*
 * bench/loadgen.c - HTTP/1.1 load generator for POST /v1/payments (scripts/bench)
 *
 * One thread, epoll, keep-alive connections on loopback, a unique event_id per
 * request (PREFIX-1, PREFIX-2, ...). Two modes:
 *   closed loop (no -r): every connection sends its next request as soon as the
 *       answer to the previous one arrived: a fixed number of requests in flight;
 *   open loop (-r RATE): request k is due at start + k/RATE whatever happened
 *       before; a due request waits for a free connection, and its latency is
 *       counted from when it was due (no coordinated omission).
 * The first -w seconds are a warm-up (sent, not counted); then -d seconds are
 * measured. Prints one JSON object on stdout. -l FILE writes one line per
 * counted request: event_id, due/sent and answered times (Unix seconds), status.
 * The Bearer token is read from the environment variable named by -t (API_TOKEN),
 * so it never shows in the process list. Every wait is bounded.
 *
 * Build: cc -O2 -o loadgen bench/loadgen.c
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock_seconds.h"

#define MAX_CONNS     4096
#define REQ_CAP       1024
#define IN_CAP        8192
#define DRAIN_S       5.0 /* after the window: wait this long at most for answers in flight */
#define REQ_TIMEOUT_S 15.0
#define HIST_SUB      64
#define HIST_N        (128 + 40 * HIST_SUB)

enum { C_DEAD, C_IDLE, C_BUSY };

typedef struct conn {
    int fd;
    int state;
    char out[REQ_CAP];
    size_t out_len, out_off;
    char in[IN_CAP];
    size_t in_len;
    uint64_t n;     /* the request's number (its id suffix) */
    double t_start; /* due (open loop) or sent (closed loop), monotonic seconds */
    double t_sent;  /* when it was written */
    double t_retry; /* dead: reconnect not before this */
} conn;

static struct {
    const char *host, *path, *prefix, *token, *log_path;
    int port, nconns;
    double rate, warmup, duration;
} opt = {"127.0.0.1", "/v1/payments", "bench", NULL, NULL, 8080, 64, 0, 1, 10};

static conn conns[MAX_CONNS];
static int ep;
static uint64_t next_n = 1;
static uint64_t hist[HIST_N];
static uint64_t status_count[600];
static uint64_t counted, errors, sent, completed, inflight, max_queued;
static double max_latency;
static double t0, t_measure, t_end, wall_offset;
static FILE *req_log;
static volatile sig_atomic_t interrupted;

static void die(const char *msg)
{
    fprintf(stderr, "loadgen: %s\n", msg);
    exit(2);
}

/* log-linear histogram of microseconds: exact below 128, then 64 steps per power of two */
static int hist_index(uint64_t us)
{
    int e;

    if (us < 128)
        return (int)us;
    e = 63 - __builtin_clzll(us);
    if (e > 7 + 39)
        return HIST_N - 1;
    return 128 + (e - 7) * HIST_SUB + (int)((us >> (e - 6)) & (HIST_SUB - 1));
}

static double hist_value_ms(int i)
{
    int e, mant;
    double lo, width;

    if (i < 128)
        return (double)i / 1000.0;
    e = 7 + (i - 128) / HIST_SUB;
    mant = (i - 128) % HIST_SUB;
    lo = (double)((uint64_t)(HIST_SUB + mant) << (e - 6));
    width = (double)((uint64_t)1 << (e - 6));
    return (lo + width / 2) / 1000.0;
}

static double percentile_ms(double p)
{
    uint64_t want, acc = 0;

    if (counted == 0)
        return 0;
    want = (uint64_t)ceil(p / 100.0 * (double)counted);
    if (want < 1)
        want = 1;
    for (int i = 0; i < HIST_N; i++) {
        acc += hist[i];
        if (acc >= want)
            return hist_value_ms(i);
    }
    return max_latency * 1000;
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void conn_close(conn *c, double now)
{
    if (c->fd >= 0) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    c->state = C_DEAD;
    c->t_retry = now + 0.05;
}

/* A blocking connect on loopback, then non-blocking use. */
static bool conn_open(conn *c)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    struct epoll_event ev = {.events = EPOLLIN};
    int one = 1;

    if (inet_pton(AF_INET, opt.host, &sa.sin_addr) != 1)
        die("the host must be an IPv4 address (the stack is on loopback)");
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return false;
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(c->fd);
        c->fd = -1;
        return false;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblock(c->fd);
    ev.data.ptr = c;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        close(c->fd);
        c->fd = -1;
        return false;
    }
    c->state = C_IDLE;
    c->in_len = 0;
    return true;
}

static bool conn_flush(conn *c, double now)
{
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w > 0) {
            c->out_off += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            return true;
        }
        return false;
    }
    (void)now;
    return true;
}

static void conn_send(conn *c, double t_start, double now)
{
    char body[600];
    int blen;

    c->n = next_n++;
    blen = snprintf(body, sizeof body,
                    "{\"event_id\":\"%s-%llu\",\"payment_id\":\"%s-%llu\",\"method\":\"pix\","
                    "\"decision\":\"approved\",\"amount_cents\":1500,\"currency\":\"BRL\","
                    "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"},"
                    "\"payer\":{\"name\":\"Maria Silva\",\"document\":\"12345678909\"},"
                    "\"decided_at\":\"2026-11-29T12:00:00Z\"}",
                    opt.prefix, (unsigned long long)c->n, opt.prefix, (unsigned long long)c->n);
    c->out_len = (size_t)snprintf(c->out, sizeof c->out,
                                  "POST %s HTTP/1.1\r\nHost: %s:%d\r\n"
                                  "Authorization: Bearer %s\r\n"
                                  "Content-Type: application/json\r\n"
                                  "Content-Length: %d\r\n\r\n%s",
                                  opt.path, opt.host, opt.port, opt.token, blen, body);
    c->out_off = 0;
    c->t_start = t_start;
    c->t_sent = now;
    c->state = C_BUSY;
    sent++;
    inflight++;
    if (!conn_flush(c, now)) {
        errors++;
        inflight--;
        conn_close(c, now);
    }
}

static void record(conn *c, int status, double now)
{
    double lat = now - c->t_start;
    bool in_window = opt.rate > 0 ? (c->t_start >= t_measure && c->t_start < t_end)
                                  : (now >= t_measure && now < t_end);

    completed++;
    inflight--;
    if (!in_window)
        return;
    counted++;
    if (status >= 100 && status < 600)
        status_count[status]++;
    hist[hist_index((uint64_t)(lat * 1e6))]++;
    if (lat > max_latency)
        max_latency = lat;
    if (req_log != NULL)
        fprintf(req_log, "%s-%llu\t%.6f\t%.6f\t%d\n", opt.prefix, (unsigned long long)c->n,
                c->t_start + wall_offset, now + wall_offset, status);
}

/* One complete answer in c->in? Then account for it; returns false on a broken stream. */
static bool conn_parse(conn *c, double now)
{
    char *hdr_end, *p;
    long clen = 0;
    int status;
    bool close_after = false;
    size_t total;

    c->in[c->in_len < IN_CAP ? c->in_len : IN_CAP - 1] = '\0';
    hdr_end = strstr(c->in, "\r\n\r\n");
    if (hdr_end == NULL)
        return c->in_len < IN_CAP - 1;
    if (sscanf(c->in, "HTTP/1.%*d %d", &status) != 1)
        return false;
    for (p = c->in; p < hdr_end; p = strstr(p, "\r\n") + 2) {
        if (strncasecmp(p, "Content-Length:", 15) == 0)
            clen = strtol(p + 15, NULL, 10);
        else if (strncasecmp(p, "Connection:", 11) == 0 && strcasestr(p, "close") != NULL &&
                 strcasestr(p, "close") < strstr(p, "\r\n"))
            close_after = true;
    }
    total = (size_t)(hdr_end + 4 - c->in) + (size_t)clen;
    if (total > IN_CAP - 1)
        return false;
    if (c->in_len < total)
        return true; /* more to come */
    record(c, status, now);
    c->in_len = 0;
    c->state = C_IDLE;
    if (close_after)
        conn_close(c, now);
    return true;
}

static void on_readable(conn *c, double now)
{
    for (;;) {
        ssize_t r = read(c->fd, c->in + c->in_len, IN_CAP - 1 - c->in_len);
        if (r > 0) {
            c->in_len += (size_t)r;
            if (c->state != C_BUSY || !conn_parse(c, now)) {
                if (c->state == C_BUSY) {
                    errors++;
                    inflight--;
                }
                conn_close(c, now);
                return;
            }
            if (c->state != C_BUSY)
                return;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        /* closed by the server or an error */
        if (c->state == C_BUSY) {
            errors++;
            inflight--;
        }
        conn_close(c, now);
        return;
    }
}

static void on_stop(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen [-u http://127.0.0.1:PORT] [-c CONNS] [-d SECONDS] [-w WARMUP_S]\n"
            "               [-r RATE] [-p ID_PREFIX] [-l LOGFILE] [-t TOKEN_ENV_VAR]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *token_env = "API_TOKEN", *url = "http://127.0.0.1:8080";
    static char host[64];
    struct epoll_event evs[256];
    struct rusage ru;
    double interval = 0, next_due, now;
    int ch;

    while ((ch = getopt(argc, argv, "u:c:d:w:r:p:l:t:h")) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 'c':
            opt.nconns = atoi(optarg);
            break;
        case 'd':
            opt.duration = atof(optarg);
            break;
        case 'w':
            opt.warmup = atof(optarg);
            break;
        case 'r':
            opt.rate = atof(optarg);
            break;
        case 'p':
            opt.prefix = optarg;
            break;
        case 'l':
            opt.log_path = optarg;
            break;
        case 't':
            token_env = optarg;
            break;
        default:
            usage();
        }
    }
    if (sscanf(url, "http://%63[^:/]:%d", host, &opt.port) != 2)
        die("-u must look like http://127.0.0.1:PORT");
    opt.host = host;
    if (opt.nconns < 1 || opt.nconns > MAX_CONNS || opt.duration <= 0 || opt.warmup < 0 ||
        opt.rate < 0 || strlen(opt.prefix) > 40)
        usage();
    opt.token = getenv(token_env);
    if (opt.token == NULL || *opt.token == '\0')
        die("the token variable is not set");
    if (opt.log_path != NULL && (req_log = fopen(opt.log_path, "w")) == NULL)
        die("cannot open the log file");
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)opt.nconns + 64) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    for (int i = 0; i < opt.nconns; i++) {
        conns[i].fd = -1;
        if (!conn_open(&conns[i]))
            die("cannot connect to the API");
    }

    now = clock_seconds(CLOCK_MONOTONIC);
    wall_offset = clock_seconds(CLOCK_REALTIME) - now;
    t0 = now;
    t_measure = t0 + opt.warmup;
    t_end = t_measure + opt.duration;
    next_due = t0;
    if (opt.rate > 0)
        interval = 1.0 / opt.rate;

    for (;;) {
        int timeout_ms = 50, n;
        uint64_t queued = 0;

        now = clock_seconds(CLOCK_MONOTONIC);
        if (interrupted)
            break;
        if (now >= t_end && (inflight == 0 || now >= t_end + DRAIN_S))
            break;
        /* reconnect the dead, send what is due */
        for (int i = 0; i < opt.nconns; i++) {
            conn *c = &conns[i];

            if (c->state == C_DEAD && now >= c->t_retry && now < t_end && !conn_open(c)) {
                c->t_retry = now + 0.1;
                continue;
            }
            if (c->state == C_BUSY && now - c->t_sent > REQ_TIMEOUT_S) {
                errors++;
                inflight--;
                conn_close(c, now);
                continue;
            }
            if (c->state != C_IDLE || now >= t_end)
                continue;
            if (opt.rate <= 0) {
                conn_send(c, now, now);
            } else if (next_due <= now) {
                conn_send(c, next_due, now);
                next_due += interval;
            }
        }
        if (opt.rate > 0 && now < t_end) {
            if (next_due <= now) {
                queued = (uint64_t)((now - next_due) / interval) + 1;
                if (queued > max_queued)
                    max_queued = queued;
                timeout_ms = 1; /* every connection is busy: wait for one */
            } else {
                timeout_ms = (int)ceil((next_due - now) * 1000);
                if (timeout_ms > 50)
                    timeout_ms = 50;
            }
        }
        n = epoll_wait(ep, evs, 256, timeout_ms);
        now = clock_seconds(CLOCK_MONOTONIC);
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;

            if (c->fd < 0)
                continue;
            if (evs[i].events & EPOLLOUT) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                if (!conn_flush(c, now)) {
                    errors++;
                    inflight--;
                    conn_close(c, now);
                    continue;
                }
            }
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                on_readable(c, now);
        }
    }
    if (req_log != NULL)
        fclose(req_log);
    getrusage(RUSAGE_SELF, &ru);

    {
        uint64_t ok = status_count[202];
        double offered = opt.rate > 0 ? opt.rate * opt.duration : 0;
        bool first = true;

        printf("{\"mode\":\"%s\",\"connections\":%d,\"warmup_s\":%.3f,\"duration_s\":%.3f,"
               "\"offered_rate\":%.1f,\"offered\":%.0f,\"sent\":%llu,\"counted\":%llu,"
               "\"ok\":%llu,\"errors\":%llu,\"unanswered\":%llu,\"max_queued\":%llu,"
               "\"rate\":%.1f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,"
               "\"max_ms\":%.3f,\"cpu_s\":%.3f,\"interrupted\":%s,\"status\":{",
               opt.rate > 0 ? "open" : "closed", opt.nconns, opt.warmup, opt.duration, opt.rate,
               offered, (unsigned long long)sent, (unsigned long long)counted,
               (unsigned long long)ok, (unsigned long long)errors, (unsigned long long)inflight,
               (unsigned long long)max_queued, (double)ok / opt.duration, percentile_ms(50),
               percentile_ms(90), percentile_ms(99), percentile_ms(99.9), max_latency * 1000,
               (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                   (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
               interrupted ? "true" : "false");
        for (int s = 100; s < 600; s++) {
            if (status_count[s] == 0)
                continue;
            printf("%s\"%d\":%llu", first ? "" : ",", s, (unsigned long long)status_count[s]);
            first = false;
        }
        printf("}}\n");
    }
    return interrupted ? 130 : 0;
}
