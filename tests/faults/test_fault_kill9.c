/*
 * tests/faults/test_fault_kill9.c - SIGKILL of the api, the relay or the worker at random moments
 *
 * Four clients send 1,500 payments over about 20 s; meanwhile six SIGKILLs (seeded: the moment,
 * and the target, each program at least once) hit the pipeline, and each victim is started again
 * at once. The clients retry every dropped request with the same event_id. At the end the
 * invariants of tfault.h hold for every event (a crash may repeat work, never lose it, and each
 * event has exactly one effect). Under ASan a SIGKILLed program cannot report leaks; the last
 * ones stop with SIGTERM and must exit 0.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/faults/tfault.h"
#include "tests/support/tcheck.h"

#define EVENTS    1500
#define CLIENTS   4
#define PACE_US   13000 /* 1,500 events over 19.5 s */
#define KILLS     6
#define FIRST_MS  1500 /* the first kill after 1.5..3 s, then one every 1.5..3.5 s */
#define LOAD_MS   120000
#define SETTLE_MS 90000

static tf_world w;

static void run(void)
{
    uint64_t seed = tf_seed(w.e.name);
    tf_rng rng;
    tf_event *ev;
    tf_load load;
    tf_result res = {0};
    long long at[KILLS], t0, deadline;
    tf_prog target[KILLS];
    int kills = 0;

    tf_rng_init(&rng, seed);
    ev = tf_events("k9", EVENTS, &rng);
    /* the schedule: every program once (in a seeded order), then at random */
    for (int i = 0; i < KILLS; i++) {
        at[i] = (i == 0 ? FIRST_MS : at[i - 1]) + tf_rng_range(&rng, i == 0 ? 0 : 1500, 3500);
        target[i] = i < 3 ? (tf_prog)i : (tf_prog)tf_rng_range(&rng, 0, 2);
    }
    for (int i = 2; i > 0; i--) {
        int j = (int)tf_rng_range(&rng, 0, i);
        tf_prog t = target[i];

        target[i] = target[j];
        target[j] = t;
    }
    if (!CHECK(tf_start_all(&w, TF_API, NULL))) {
        tf_events_free(ev, EVENTS);
        return;
    }
    t0 = tproc_now_ms();
    deadline = t0 + LOAD_MS;
    tf_load_start(&load, &w, ev, EVENTS, CLIENTS, PACE_US);
    while (tproc_now_ms() < deadline && (kills < KILLS || !tf_load_done(&load))) {
        for (int q = 0; q < 3; q++)
            if (w.up[q] && !tf_running(&w, (tf_prog)q)) {
                FAIL("%s died by itself (status %d)", tf_prog_name((tf_prog)q),
                     tproc_wait_exit(tf_proc(&w, (tf_prog)q), 0));
                tproc_print_log_tail(tf_proc(&w, (tf_prog)q), 40);
                tf_reap(&w, (tf_prog)q);
                CHECK(tf_start(&w, (tf_prog)q, NULL));
            }
        if (kills < KILLS && tproc_now_ms() >= t0 + at[kills]) {
            tf_prog t = target[kills];
            long long k0 = tproc_now_ms();
            int status = tf_kill9(&w, t);

            CHECK_INT(status, 128 + SIGKILL);
            if (!CHECK(tf_start(&w, t, NULL)))
                break;
            printf("kill %d: %s at %.2f s (%d accepted so far), back in %.2f s\n", kills + 1,
                   tf_prog_name(t), (double)(k0 - t0) / 1000.0, atomic_load(&load.accepted),
                   te2e_elapsed_s(k0));
            kills++;
        }
        tproc_sleep_ms(10);
    }
    if (!tf_load_done(&load))
        tf_load_abort(&load); /* the loop above ran out of time */
    tf_load_join(&load);
    CHECK_INT(kills, KILLS);
    printf("load done %.2f s after its start\n", te2e_elapsed_s(t0));
    if (w.up[TF_API] && w.up[TF_RELAY] && w.up[TF_WORKER])
        tf_check_invariants(&w, &load, SETTLE_MS, &res);
    tf_figures("kill9", w.crashes, res.accepted, w.crashes, 0);
    tf_stop_all(&w);
    tf_check_logs(&w);
    tf_events_free(ev, EVENTS);
}

int main(void)
{
    return tf_main(&w, "fault-kill9", "test_fault_kill9", run);
}
