/*
 * tests/faults/test_fault_slow_clients.c - slow clients do not starve the others
 *
 * 200 connections each send a payment request one byte a second (nonblocking raw sockets, for
 * about 8 s: they never finish). Meanwhile a normal client posts a payment every 100 ms: each
 * must get its 202 within 2 s, and /healthz stays 200. Then the slow connections are closed;
 * none of their payments exists, the API still runs, answers, and stops with status 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/faults/tfault.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tsock.h"

#define SLOW        200
#define SLOW_MS     8000
#define NORMAL_MS   100  /* one normal request this often */
#define MAX_LATENCY 2000 /* ms */

static tf_world w;

typedef struct slow {
    int fd[SLOW];
    char req[SLOW][512];
    size_t len[SLOW], pos[SLOW];
    int opened, closed_by_server, bytes;
    atomic_bool stop;
} slow;

static void *slow_main(void *arg)
{
    slow *s = arg;
    long long t0 = tproc_now_ms();

    /* one byte from each connection, once a second, until told or SLOW_MS passed */
    for (int tick = 0; !atomic_load(&s->stop) && tproc_now_ms() - t0 < SLOW_MS; tick++) {
        for (int i = 0; i < SLOW; i++) {
            ssize_t n;

            if (s->fd[i] < 0 || s->pos[i] >= s->len[i])
                continue;
            n = send(s->fd[i], s->req[i] + s->pos[i], 1, MSG_NOSIGNAL);
            if (n == 1) {
                s->pos[i]++;
                s->bytes++;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                s->closed_by_server++;
                close(s->fd[i]);
                s->fd[i] = -1;
            }
        }
        while (!atomic_load(&s->stop) && tproc_now_ms() < t0 + (tick + 1) * 1000LL &&
               tproc_now_ms() - t0 < SLOW_MS)
            tproc_sleep_ms(20);
    }
    return NULL;
}

static long long post_timed(int i, long *status)
{
    char event[32], payment[32];
    char *body;
    thttp_resp r;
    long long t0 = tproc_now_ms(), took;

    snprintf(event, sizeof event, "fast-e%d", i);
    snprintf(payment, sizeof payment, "fast-p%d", i);
    body = tapi_payment(event, payment);
    tapi_post(&w.api, body, NULL, &r);
    took = tproc_now_ms() - t0;
    *status = r.status;
    thttp_resp_free(&r);
    free(body);
    return took;
}

static void run(void)
{
    static slow s;
    pthread_t tid;
    long long t0, worst = 0, total = 0;
    int normal = 0, slow_ok = 0, health_ok = 0;
    long status;
    thttp_resp r;

    if (!CHECK(tf_start(&w, TF_API, NULL)))
        return;
    atomic_init(&s.stop, false);
    for (int i = 0; i < SLOW; i++) {
        char body[256];

        snprintf(body, sizeof body,
                 "{\"event_id\":\"slow-e%d\",\"payment_id\":\"slow-p%d\",\"method\":\"pix\","
                 "\"decision\":\"approved\",\"amount_cents\":100,\"currency\":\"BRL\","
                 "\"payee\":{\"bank\":\"001\",\"account\":\"1234-5\"}}",
                 i, i);
        s.len[i] =
            (size_t)snprintf(s.req[i], sizeof s.req[i],
                             "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             "Authorization: Bearer " TAPI_TOKEN "\r\n"
                             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                             strlen(body), body);
        s.fd[i] = tsock_connect(w.api.port);
        if (s.fd[i] >= 0) {
            fcntl(s.fd[i], F_SETFL, fcntl(s.fd[i], F_GETFL) | O_NONBLOCK);
            s.opened++;
        }
    }
    CHECK_INT(s.opened, SLOW);
    if (!CHECK(pthread_create(&tid, NULL, slow_main, &s) == 0))
        return;

    /* the normal client, all along */
    t0 = tproc_now_ms();
    while (tproc_now_ms() - t0 < SLOW_MS - 500) {
        long long took = post_timed(normal, &status);

        tcheck_context("normal request %d", normal);
        CHECK_INT(status, 202);
        if (took > MAX_LATENCY)
            FAIL("took %lld ms (want < %d) with %d slow connections open", took, MAX_LATENCY, SLOW);
        tcheck_context_clear();
        worst = took > worst ? took : worst;
        total += took;
        normal++;
        if (normal % 10 == 0) {
            thttp_get(w.api.url, "/healthz", NULL, &r);
            health_ok += CHECK_INT(r.status, 200);
            thttp_resp_free(&r);
        }
        tproc_sleep_ms(NORMAL_MS);
    }
    atomic_store(&s.stop, true);
    pthread_join(tid, NULL);
    printf("%d slow connections sent %d bytes in all; %d closed by the server meanwhile\n",
           s.opened, s.bytes, s.closed_by_server);
    printf("%d normal requests: worst %lld ms, mean %.1f ms; /healthz 200 %d times\n", normal,
           worst, normal ? (double)total / normal : 0.0, health_ok);
    for (int i = 0; i < SLOW; i++) {
        if (s.fd[i] < 0)
            continue;
        slow_ok++;
        close(s.fd[i]);
        s.fd[i] = -1;
    }
    CHECK(tf_running(&w, TF_API));
    /* none of the unfinished requests became a payment; every normal one did */
    CHECK_INT(tdb_long(w.e.db, "SELECT count(*) FROM payments WHERE event_id LIKE 'slow-%'", NULL),
              0);
    CHECK_INT(tdb_long(w.e.db, "SELECT count(*) FROM payments WHERE event_id LIKE 'fast-%'", NULL),
              normal);
    tproc_sleep_ms(200);
    thttp_get(w.api.url, "/healthz", NULL, &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    CHECK(post_timed(normal, &status) < MAX_LATENCY);
    CHECK_INT(status, 202);
    tf_figures("slow_clients", 0, normal + 1, 0, s.opened);
    tf_stop(&w, TF_API);
    tf_check_logs(&w);
}

int main(void)
{
    return tf_main(&w, "fault-slow-clients", "test_fault_slow_clients", run);
}
