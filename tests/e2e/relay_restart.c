/* tests/e2e/relay_restart.c - the shared body of test_relay_broker_restart and _db_restart */
#include "tests/e2e/relay_restart.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tstack.h"

#define ROWS        5000 /* several batches of 1,024: the outage lands mid-drain */
#define BEFORE_STOP 500
#define RECOVER_MS  90000

static void run(te2e *e, const char *what)
{
    const char *slow[] = {"GATEWAY_FAILPOINTS=relay.after_publish=sleep=500", NULL};
    char label[64];
    tprog relay = {0};
    long long n, t0, t_back;
    pid_t pid, guard;
    int done_fd = -1, *counts, missing = 0, twice = 0;
    tmq *m;
    tmq_msg *msgs;
    size_t nmsgs = 0;
    thttp_resp r;

    if (!CHECK(te2e_seed(e->db, "rr", ROWS, true)))
        return;
    snprintf(label, sizeof label, "%s-relay", e->name);
    t0 = tproc_now_ms();
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, label, e, slow)))
        return;
    pid = tproc_pid(relay.proc);

    n = te2e_wait_long(e->db, "SELECT least(count(*), 500) FROM outbox WHERE state = 'published'",
                       BEFORE_STOP, 30000, 10);
    CHECK_INT(n, BEFORE_STOP);
    printf("%lld rows published %.2f s after start; stopping the %s\n",
           tdb_long(e->db, "SELECT count(*) FROM outbox WHERE state = 'published'", NULL),
           te2e_elapsed_s(t0), what);

    guard = tstack_guard_start(what, &done_fd);
    CHECK(guard > 0);
    CHECK_INT(tstack_run("stop", what), 0);
    tproc_sleep_ms(1000); /* the relay meets the outage: its next batch fails */
    CHECK(tproc_running(relay.proc));
    CHECK_INT(tstack_run("start", what), 0); /* always, whatever failed above */
    tstack_guard_done(guard, done_fd);
    t_back = tproc_now_ms();

    n = te2e_wait_long(e->db, "SELECT count(*) FROM outbox WHERE state = 'published'", ROWS,
                       RECOVER_MS, 50);
    CHECK_INT(n, ROWS);
    printf("all %lld rows published %.2f s after the %s came back\n", n, te2e_elapsed_s(t_back),
           what);
    CHECK_INT(tdb_long(e->db, "SELECT count(*) FROM payments WHERE status <> 'published'", NULL),
              0);
    CHECK(tproc_running(relay.proc));
    CHECK_INT(tproc_pid(relay.proc), pid);
    /* ready again without a restart; its rows may all be marked before it reconnects */
    for (long long until = tproc_now_ms() + RECOVER_MS;;) {
        thttp_get(relay.url, "/readyz", NULL, &r);
        if (r.status == 200 || tproc_now_ms() >= until)
            break;
        thttp_resp_free(&r);
        tproc_sleep_ms(100);
    }
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    printf("relay: %d broker connections, %.0f confirm timeouts, %.0f nacked\n",
           tproc_log_count(relay.proc, "event=mq_connected"),
           tprog_metric(&relay, "paygw_relay_confirm_timeouts_total"),
           tprog_metric(&relay, "paygw_relay_nacked_total"));

    /* at least once: a batch published but not marked before the outage is published again */
    m = tmq_connect(e->amqp_url);
    if (CHECK(m != NULL)) {
        msgs = tmq_read_all(m, "payments.settlement", true, &nmsgs);
        CHECK(msgs != NULL);
        counts = te2e_event_counts(msgs, nmsgs, "rr", ROWS);
        for (int i = 1; i <= ROWS; i++) {
            if (counts[i] == 0 && missing++ < 5)
                FAIL("event rr-e%d is not in the queue", i);
            twice += counts[i] > 1;
        }
        printf("queue: %zu messages, %d events missing, %d events more than once\n", nmsgs, missing,
               twice);
        CHECK_INT(missing, 0);
        CHECK_INT(counts[0], 0);
        free(counts);
        tmq_msgs_free(msgs, nmsgs);
        tmq_close(m);
    }
    tprog_stop(&relay, 10000);
}

int relay_restart_main(const char *test_name, const char *what)
{
    te2e e;
    int rc = te2e_init(&e, test_name);

    if (rc == 0)
        run(&e, what);
    else if (rc != 77)
        FAIL("the fixture could not be set up");
    te2e_cleanup(&e);
    return rc == 77 ? 77 : tcheck_summary(test_name);
}
