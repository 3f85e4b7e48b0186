/*
 * tests/e2e/test_relay_alarm.c - the relay under a broker memory alarm
 *
 * `rabbitmqctl set_vm_memory_high_watermark 0` raises the alarm at once: the
 * broker blocks every connection that publishes (connection.blocked) and reads
 * nothing more from it until the alarm clears. Three runs, each on ROWS pending
 * rows, with the relay slowed a little (relay.after_publish=sleep=50) so that
 * the alarm lands while batches are in flight:
 *
 *   held - the alarm is held HOLD_MS, longer than the 5 s confirm timeout, then
 *          lifted. Confirms that came while blocked reached their lanes, no
 *          batch was given up, and the queue holds each event exactly once.
 *   lost - while blocked with a batch in flight, the broker closes the relay's
 *          connection. Afterwards every row marked published has its message
 *          in the queue: never a mark without a confirm from the channel that
 *          published it.
 *   stop - SIGTERM while blocked: exit 0 within 10 s, every row marked
 *          published in the queue, the rest pending; a second relay publishes
 *          them once the alarm is gone.
 *
 * The alarm is the whole broker's, so this test runs alone, and a guard
 * process restores the watermark if the test dies first.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"
#include "tests/support/tstack.h"

#define ROWS    20000
#define HOLD_MS 8000
#define QUEUE   "payments.settlement"

static te2e e;
static char watermark[64] = "0.4"; /* the broker's own, read before the first alarm */
static pid_t guard = -1;
static int guard_fd = -1;

static bool ctl(const char *a, const char *b, const char *c, const char *d)
{
    const char *args[] = {"ctl", a, b, c, d, NULL};
    int rc = tstack_capture(args, NULL, 0);

    if (rc != 0)
        FAIL("scripts/stack ctl %s %s: status %d", a, b ? b : "", rc);
    return rc == 0;
}

static bool alarm_on(void)
{
    const char *restore[] = {"ctl", "set_vm_memory_high_watermark", watermark, NULL};

    guard = tstack_guard_cmd(restore, &guard_fd);
    printf("alarm on (watermark %s -> 0)\n", watermark);
    return ctl("set_vm_memory_high_watermark", "0", NULL, NULL);
}

static void alarm_off(void)
{
    printf("alarm off (watermark back to %s)\n", watermark);
    CHECK(ctl("set_vm_memory_high_watermark", watermark, NULL, NULL));
    tstack_guard_done(guard, guard_fd);
    guard = -1;
}

/* The rows of @prefix in @state, as a bitmap over 1..ROWS. */
static unsigned char *rows_in(const char *prefix, const char *state, long long *count)
{
    char sql[512];

    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(substr(event_id, %zu), ',' ORDER BY id), '') "
             "FROM outbox WHERE state = '%s' AND event_id LIKE '%s-e%%'",
             strlen(prefix) + 3, state, prefix);
    return te2e_event_set(e.db, sql, ROWS, count);
}

static long long published(const char *prefix)
{
    char sql[256];

    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM outbox WHERE state = 'published' AND event_id LIKE '%s-e%%'",
             prefix);
    return tdb_long(e.db, sql, NULL);
}

static long long wait_published(const char *prefix, long long want, int timeout_ms)
{
    char sql[256];

    snprintf(sql, sizeof sql,
             "SELECT least(count(*), %lld) FROM outbox WHERE state = 'published' "
             "AND event_id LIKE '%s-e%%'",
             want, prefix);
    return te2e_wait_long(e.db, sql, want, timeout_ms, 20);
}

/*
 * Take every message of the queue and compare with the rows: each row marked
 * published must be there (@exactly: once, and nothing else). Returns how
 * many rows are marked published.
 */
static long long compare_queue(const char *prefix, bool exactly)
{
    long long marked_n;
    unsigned char *marked = rows_in(prefix, "published", &marked_n);
    tmq *m = tmq_connect(e.amqp_url);
    tmq_msg *msgs;
    size_t n = 0;
    int *counts, missing = 0, twice = 0, unmarked = 0;

    if (!CHECK(m != NULL && marked != NULL)) {
        free(marked);
        return -1;
    }
    msgs = tmq_read_all(m, QUEUE, true, &n);
    counts = te2e_event_counts(msgs, n, prefix, ROWS);
    for (int i = 1; i <= ROWS; i++) {
        if (marked[i] && counts[i] == 0 && missing++ < 5)
            FAIL("%s-e%d is marked published but its message is not in the queue", prefix, i);
        twice += counts[i] > 1;
        unmarked += !marked[i] && counts[i] > 0;
    }
    printf("%s: %lld rows marked published; queue: %zu messages, %d of them twice or more, %d "
           "for rows still pending\n",
           prefix, marked_n, n, twice, unmarked);
    CHECK_INT(missing, 0);
    if (exactly) {
        CHECK_INT(twice, 0);
        CHECK_INT(counts[0], 0);
        CHECK_INT(n, marked_n);
    }
    free(counts);
    tmq_msgs_free(msgs, n);
    tmq_close(m);
    free(marked);
    return marked_n;
}

/* Start a slowed relay on ROWS new rows of @prefix and raise the alarm mid-stream. */
static bool start_blocked(tprog *relay, const char *prefix)
{
    const char *slow[] = {"GATEWAY_FAILPOINTS=relay.after_publish=sleep=50", NULL};
    char label[64];

    snprintf(label, sizeof label, "relay_alarm-%s", prefix);
    if (!CHECK(te2e_seed(e.db, prefix, ROWS, true)) ||
        !CHECK(tprog_start(relay, TPROG_RELAY, label, &e, slow)))
        return false;
    CHECK_INT(wait_published(prefix, 2048, 20000), 2048);
    if (!alarm_on())
        return false;
    /* the broker blocks the relay at its next publish: batches are in flight then */
    if (!CHECK(tproc_wait_log(relay->proc, "event=mq_blocked", 15000))) {
        printf("%s: %lld of %d published, and the relay was never blocked\n", prefix,
               published(prefix), ROWS);
        return false;
    }
    printf("%s: blocked with %lld of %d published\n", prefix, published(prefix), ROWS);
    return true;
}

static void run_held(void)
{
    tprog relay = {0};
    long long t0;

    tcheck_context("held");
    if (start_blocked(&relay, "ah")) {
        tproc_sleep_ms(HOLD_MS);
        printf("ah: %lld published after %d ms blocked\n", published("ah"), HOLD_MS);
        CHECK_INT(tprog_metric(&relay, "paygw_relay_broker_blocked"), 1);
    }
    alarm_off();
    t0 = tproc_now_ms();
    CHECK_INT(wait_published("ah", ROWS, 60000), ROWS);
    printf("ah: all published %.1f s after the alarm\n", te2e_elapsed_s(t0));
    CHECK_INT(tprog_metric(&relay, "paygw_relay_confirm_timeouts_total"), 0);
    CHECK_INT(tprog_metric(&relay, "paygw_relay_broker_blocked"), 0);
    CHECK(tproc_log_contains(relay.proc, "relay_unblocked"));
    CHECK_INT(tproc_log_count(relay.proc, "event=mq_connected"), 1);
    tprog_stop(&relay, 10000);
    compare_queue("ah", true);
}

static void run_lost(void)
{
    tprog relay = {0};

    tcheck_context("lost");
    if (start_blocked(&relay, "al")) {
        tproc_sleep_ms(1000); /* confirms of what the broker took before the block arrive */
        CHECK(ctl("close_all_connections", "--vhost", e.vhost, "relay_alarm test"));
        /* the relay reconnects, publishes its next batch and is blocked again */
        for (long long t = tproc_now_ms() + 10000;
             tproc_log_count(relay.proc, "event=mq_connected") < 2 && tproc_now_ms() < t;)
            tproc_sleep_ms(50);
        CHECK_INT(tproc_log_count(relay.proc, "event=mq_connected"), 2);
        tproc_sleep_ms(3000);
    }
    alarm_off();
    CHECK_INT(wait_published("al", ROWS, 60000), ROWS);
    tprog_stop(&relay, 10000);
    compare_queue("al", false);
}

static void run_stop(void)
{
    tprog relay = {0}, second = {0};
    long long t_sig;
    int status;

    tcheck_context("stop");
    if (start_blocked(&relay, "as")) {
        t_sig = tproc_now_ms();
        tproc_signal(relay.proc, SIGTERM);
        status = tproc_wait_exit(relay.proc, 10000);
        printf("as: relay exited with status %d %lld ms after SIGTERM, while blocked\n", status,
               tproc_now_ms() - t_sig);
        CHECK_INT(status, 0);
        if (status != 0)
            tproc_print_log_tail(relay.proc, 40);
    }
    tprog_free(&relay);
    alarm_off();
    if (compare_queue("as", false) >= ROWS)
        FAIL("as: every row was published before the stop: nothing was in flight");
    if (!CHECK(tprog_start(&second, TPROG_RELAY, "relay_alarm-second", &e, NULL)))
        return;
    CHECK_INT(wait_published("as", ROWS, 60000), ROWS);
    tprog_stop(&second, 10000);
}

static void run(void)
{
    const char *args[] = {"ctl", "eval", "vm_memory_monitor:get_vm_memory_high_watermark().", NULL};
    char out[64];

    if (!CHECK(tstack_capture(args, out, sizeof out) == 0 && out[0] != '\0'))
        return;
    if (strspn(out, "0123456789.") == strlen(out))
        snprintf(watermark, sizeof watermark, "%s", out);
    else
        printf("watermark \"%s\" is not a fraction: restoring %s\n", out, watermark);
    run_held();
    run_lost();
    run_stop();
    tcheck_context_clear();
}

int main(void)
{
    return te2e_main("relay_alarm", &e, run);
}
