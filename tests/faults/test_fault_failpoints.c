/*
 * tests/faults/test_fault_failpoints.c - a crash at each boundary of docs/operations.md,
 * "Failpoints"
 *
 * usage: test_fault_failpoints POINT   (one of the six points; meson runs each as its own test)
 *
 * The whole pipeline (api + relay + worker) on a database and a vhost of its own takes a batch
 * of payments from four paced clients: most settle on attempt 1, some fail once
 * (fail-first=1) and settle on attempt 2 after a retry, some are refused (unroutable), some
 * are R$ 0 (dead-lettered). The program that owns POINT runs with POINT=exit@N (N seeded) and
 * dies there with status 137; it is restarted at once without the failpoint, and the clients
 * retry every dropped request with the same event_id. Then the invariants of tfault.h hold:
 * every 202 ends in exactly one terminal status with exactly one balanced effect per settled
 * event, the inbox is the settled set, nothing accepted is lost, reconciliation says ok.
 *
 * For the API's points the crash is checked from the client's side as well: right after it
 * (before the restart) every request that got no answer has either all of its rows or none;
 * after api.after_commit at least one of them was committed and its retry gets the 202 replay
 * (Idempotent-Replayed: true); after api.before_commit at least one was not, and its retry gets
 * a fresh 202.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/faults/tfault.h"
#include "tests/support/tcheck.h"

#define EVENTS    200
#define CLIENTS   4
#define PACE_US   15000 /* 200 events over 3 s: about one relay and one worker batch each */
#define CRASH_MS  60000 /* the failpoint must be hit within this long */
#define SETTLE_MS 60000

typedef struct fp_case {
    const char *point;
    tf_prog prog;
    int lo, hi; /* exit@N with N in [lo, hi]; hi 0: up to half the events that retry */
} fp_case;

static const fp_case cases[] = {
    /* N falls in the first half of the load, so the crash meets work in flight */
    {"api.before_commit", TF_API, 10, 80},           /* hit per committed batch */
    {"api.after_commit", TF_API, 10, 80},            /* per accepted request */
    {"relay.after_publish", TF_RELAY, 10, 40},       /* per published batch */
    {"relay.before_commit", TF_RELAY, 10, 40},       /* per published batch, before its marks */
    {"worker.before_commit", TF_WORKER, 10, 40},     /* per settled batch */
    {"worker.after_commit", TF_WORKER, 10, 40},      /* per consumed batch */
    {"worker.after_retry_publish", TF_WORKER, 2, 0}, /* per retry copy */
};

static tf_world w;
static const fp_case *the_case; /* argv[1]'s */

static void run(void)
{
    const fp_case *c = the_case;
    uint64_t seed = tf_seed(w.e.name);
    tf_rng rng;
    tf_event *ev;
    tf_load load;
    tf_result res = {0};
    char spec[128], prefix[32];
    long long t0, deadline;
    bool crashed = false;
    long n;

    tf_rng_init(&rng, seed);
    snprintf(prefix, sizeof prefix, "fp%ld", (long)(seed % 100000));
    ev = tf_events(prefix, EVENTS, &rng);
    if (c->hi == 0) {
        int retries = 0;

        for (int i = 0; i < EVENTS; i++)
            retries += ev[i].kind == TF_RETRY;
        n = (long)tf_rng_range(&rng, c->lo, retries / 2 > c->lo ? retries / 2 : c->lo);
    } else {
        n = (long)tf_rng_range(&rng, c->lo, c->hi);
    }
    if (n == 1)
        snprintf(spec, sizeof spec, "%s=exit", c->point);
    else
        snprintf(spec, sizeof spec, "%s=exit@%ld", c->point, n);
    printf("%s: %s on %s; %d events from %d clients\n", c->point, spec, tf_prog_name(c->prog),
           EVENTS, CLIENTS);
    if (!CHECK(tf_start_all(&w, c->prog, spec))) {
        tf_events_free(ev, EVENTS);
        return;
    }
    t0 = tproc_now_ms();
    deadline = t0 + CRASH_MS;
    tf_load_start(&load, &w, ev, EVENTS, CLIENTS, PACE_US);
    for (;;) {
        if (!crashed && !tf_running(&w, c->prog)) {
            tproc *p = tf_proc(&w, c->prog);
            int status;

            CHECK(tproc_log_contains(p, "event=failpoint_exit"));
            status = tf_reap(&w, c->prog);
            CHECK_INT(status, 137);
            w.crashes++;
            crashed = true;
            printf("%s died (status %d) %.2f s into the load, %d events accepted so far\n",
                   tf_prog_name(c->prog), status, te2e_elapsed_s(t0), atomic_load(&load.accepted));
            if (c->prog == TF_API) {
                int dropped, with_row;

                /* a COMMIT sent just before the exit lands in a moment: let it */
                tproc_sleep_ms(500);
                dropped = tf_load_snapshot(&load, &with_row);
                CHECK(dropped > 0);
                if (strcmp(c->point, "api.after_commit") == 0)
                    CHECK(with_row >= 1); /* the crashed answer's request committed */
                else
                    CHECK(dropped - with_row >= 1); /* the crashed batch committed nothing */
            }
            if (!CHECK(tf_start(&w, c->prog, NULL))) {
                tf_load_abort(&load);
                break;
            }
        }
        for (int q = 0; q < 3; q++) {
            /* the program under test may die between the check above and this one: it is
             * the next iteration's to notice, with its failpoint's exit status */
            if (!crashed && q == (int)c->prog)
                continue;
            if (w.up[q] && !tf_running(&w, (tf_prog)q)) {
                FAIL("%s died, and no failpoint of it was armed", tf_prog_name((tf_prog)q));
                tproc_print_log_tail(tf_proc(&w, (tf_prog)q), 30);
                tf_reap(&w, (tf_prog)q);
            }
        }
        if (crashed && tf_load_done(&load))
            break;
        if (tproc_now_ms() >= deadline) {
            if (!crashed)
                FAIL("%s was not hit within %d ms", spec, CRASH_MS);
            tf_load_abort(&load);
            break;
        }
        tproc_sleep_ms(20);
    }
    tf_load_join(&load);
    printf("load done %.2f s after its start\n", te2e_elapsed_s(t0));
    if (crashed && w.up[TF_API] && w.up[TF_RELAY] && w.up[TF_WORKER]) {
        double redelivered;

        tf_check_invariants(&w, &load, SETTLE_MS, &res);
        redelivered = tprog_metric(&w.worker, "paygw_worker_redelivered_total");
        printf("worker since its last start: %.0f redelivered, %.0f duplicates skipped\n",
               redelivered, tprog_metric(&w.worker, "paygw_worker_duplicates_skipped_total"));
        /* a worker that died holding deliveries gets them back: they were never acked */
        if (c->prog == TF_WORKER)
            CHECK(redelivered >= 1);
        tf_figures(c->point, w.crashes, res.accepted, w.crashes, 0);
    }
    tf_stop_all(&w);
    tf_check_logs(&w);
    tf_events_free(ev, EVENTS);
}

int main(int argc, char **argv)
{
    const fp_case *c = NULL;
    char name[96];

    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].point) == 0)
            c = &cases[i];
    if (c == NULL) {
        fprintf(
            stderr,
            "usage: %s POINT (api.before_commit, api.after_commit, "
            "relay.after_publish, relay.before_commit, worker.before_commit, worker.after_commit, "
            "worker.after_retry_publish)\n",
            argv[0]);
        return 2;
    }
    snprintf(name, sizeof name, "fault-%s", c->point);
    for (char *s = name; *s; s++)
        if (*s == '.' || *s == '_')
            *s = '-';
    the_case = c;
    return tf_main(&w, name, name, run);
}
