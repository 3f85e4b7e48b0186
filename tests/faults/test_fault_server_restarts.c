/*
 * tests/faults/test_fault_server_restarts.c - RabbitMQ or PostgreSQL restarts under load
 *
 * usage: test_fault_server_restarts broker|db
 *
 * Four clients send 2,000 payments at a steady pace over about 15 s to the whole pipeline;
 * a third of the way in, "$GW_STACK stop WHAT", a pause, "$GW_STACK start WHAT" (tstack's guard
 * starts it again if this test dies first). The clients retry every 503 and every dropped
 * request with the same event_id. None of the three programs may die: each reconnects by itself
 * (docs/architecture.md). At the end the invariants of tfault.h hold for every event that got a
 * 202. Stops the shared broker or database: meson runs it alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/faults/tfault.h"
#include "tests/support/tcheck.h"
#include "tests/support/tstack.h"

#define EVENTS    2000
#define CLIENTS   4
#define PACE_US   7500 /* 2,000 events over 15 s */
#define STOP_AT   5000 /* ms into the load */
#define OUTAGE_MS 2000
#define LOAD_MS   120000
#define SETTLE_MS 90000

static tf_world w;
static const char *what; /* argv[1]: "broker" or "db" */

static void run(void)
{
    uint64_t seed = tf_seed(w.e.name);
    pid_t pids[3];
    tf_rng rng;
    tf_event *ev;
    tf_load load;
    tf_result res = {0};
    long long t0, t_stop, t_back, deadline;
    int done_fd = -1, accepted_at_stop;
    pid_t guard;
    char base[64];
    thttp_resp r;
    long status = 0;
    int not_ready = 0;

    tf_rng_init(&rng, seed);
    ev = tf_events(strcmp(what, "db") == 0 ? "srdb" : "srmq", EVENTS, &rng);
    if (!CHECK(tf_start_all(&w, TF_API, NULL))) {
        tf_events_free(ev, EVENTS);
        return;
    }
    for (int q = 0; q < 3; q++)
        pids[q] = tproc_pid(tf_proc(&w, (tf_prog)q));
    t0 = tproc_now_ms();
    tf_load_start(&load, &w, ev, EVENTS, CLIENTS, PACE_US);
    while (tproc_now_ms() < t0 + STOP_AT && !tf_load_done(&load))
        tproc_sleep_ms(20);

    /* the outage: whatever happens, the server is started again */
    accepted_at_stop = atomic_load(&load.accepted);
    t_stop = tproc_now_ms();
    guard = tstack_guard_start(what, &done_fd);
    CHECK(guard > 0);
    CHECK_INT(tstack_run("stop", what), 0);
    printf("%s stopped %.2f s into the load (%d accepted so far)\n", what, te2e_elapsed_s(t0),
           accepted_at_stop);
    tproc_sleep_ms(OUTAGE_MS);
    /* always started again: a failed start is retried; after the third, the guard tries too */
    for (int attempt = 1;; attempt++) {
        int rc = tstack_run("start", what);

        if (rc == 0) {
            tstack_guard_done(guard, done_fd);
            break;
        }
        if (attempt == 3) {
            FAIL("\"%s start %s\" failed 3 times (status %d)", "$GW_STACK", what, rc);
            if (guard > 0) {
                close(done_fd); /* end of file, not "done": the guard runs the start itself */
                waitpid(guard, NULL, 0);
            }
            break;
        }
        fprintf(stderr, "start %s failed (%d), again in 1 s\n", what, rc);
        tproc_sleep_ms(1000);
    }
    t_back = tproc_now_ms();
    printf("%s back after %.2f s; %d accepted during the outage\n", what, te2e_elapsed_s(t_stop),
           atomic_load(&load.accepted) - accepted_at_stop);

    deadline = t0 + LOAD_MS;
    while (!tf_load_done(&load) && tproc_now_ms() < deadline) {
        for (int q = 0; q < 3; q++)
            if (w.up[q] && !tf_running(&w, (tf_prog)q)) {
                FAIL("%s died during the %s restart (status %d)", tf_prog_name((tf_prog)q), what,
                     tproc_wait_exit(tf_proc(&w, (tf_prog)q), 0));
                tproc_print_log_tail(tf_proc(&w, (tf_prog)q), 40);
                tf_reap(&w, (tf_prog)q);
            }
        tproc_sleep_ms(50);
    }
    if (!tf_load_done(&load))
        tf_load_abort(&load); /* the loop above ran out of time */
    tf_load_join(&load);
    printf("load done %.2f s after its start, %.2f s after the %s came back\n", te2e_elapsed_s(t0),
           te2e_elapsed_s(t_back), what);

    /* the same processes, ready again: they reconnected by themselves */
    for (int q = 0; q < 3; q++) {
        tcheck_context("%s", tf_prog_name((tf_prog)q));
        if (CHECK(tf_running(&w, (tf_prog)q)))
            CHECK_INT(tproc_pid(tf_proc(&w, (tf_prog)q)), pids[q]);
        tcheck_context_clear();
    }
    /* ready again soon (a pooled connection may notice the restart on its first use: one 503) */
    tf_api_url(&w, base, sizeof base);
    for (long long until = tproc_now_ms() + 5000;;) {
        thttp_get(base, "/readyz", NULL, &r);
        status = r.status;
        thttp_resp_free(&r);
        if (status == 200 || tproc_now_ms() >= until)
            break;
        not_ready++;
        tproc_sleep_ms(100);
    }
    CHECK_INT(status, 200);
    printf("api /readyz: 200 after %d not-ready answers\n", not_ready);
    if (w.up[TF_API] && w.up[TF_RELAY] && w.up[TF_WORKER] &&
        tf_check_invariants(&w, &load, SETTLE_MS, &res))
        printf("%s restart: %d events checked\n", what, res.accepted);
    printf("relay: %d broker connections; worker: %d broker connections\n",
           tproc_log_count(tf_proc(&w, TF_RELAY), "event=mq_connected"),
           tproc_log_count(tf_proc(&w, TF_WORKER), "event=mq_connected"));
    tf_figures(strcmp(what, "db") == 0 ? "db_restart" : "broker_restart", 0, res.accepted, 1, 0);
    tf_stop_all(&w);
    tf_check_logs(&w);
    tf_events_free(ev, EVENTS);
}

int main(int argc, char **argv)
{
    char name[64];

    what = argc == 2 ? argv[1] : "";
    if (strcmp(what, "broker") != 0 && strcmp(what, "db") != 0) {
        fprintf(stderr, "usage: %s broker|db\n", argv[0]);
        return 2;
    }
    snprintf(name, sizeof name, "fault-%s-restart", what);
    return tf_main(&w, name, name, run);
}
