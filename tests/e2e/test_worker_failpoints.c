/*
 * tests/e2e/test_worker_failpoints.c - the worker crashes at each of its boundaries
 *
 * GATEWAY_FAILPOINTS makes payments-worker _exit(137) at one point; a worker
 * restarted without it must leave exactly one effect:
 *   worker.after_commit       committed, not acked: the broker redelivers, the
 *                             new worker skips it as a duplicate;
 *   worker.before_commit      nothing committed: the new worker settles it;
 *   worker.after_retry_publish (fail-first=1) the delayed copy was confirmed,
 *                             the original not acked: both come back, one
 *                             settles on attempt 2, the other is a duplicate.
 * One database and one vhost; each case has its own payment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define CRASH_MS  15000
#define SETTLE_MS 20000
#define RULES     "BANK_SIM_RULES=001/7777-7:fail-first=1" /* after_retry_publish's account */

static te2e e;
static tmq *mq;

static long long count_for(const char *table, const char *event_id)
{
    char sql[128];

    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE event_id = $1", table);
    return tdb_long(e.db, sql, event_id, NULL);
}

/* check_effects - @event has @inbox inbox rows and @ledger ledger entries (two checks). */
static void check_effects_at(int line, const char *event, long long inbox, long long ledger)
{
    tcheck_int(__FILE__, line, "inbox rows", count_for("inbox", event), inbox);
    tcheck_int(__FILE__, line, "ledger entries", count_for("ledger_entries", event), ledger);
}
#define check_effects(event, inbox, ledger) check_effects_at(__LINE__, (event), (inbox), (ledger))

/*
 * crash_on - in the context "worker.@point": start a worker with
 * GATEWAY_FAILPOINTS=worker.@point=exit (and @rules, BANK_SIM_RULES=..., when
 * not NULL), publish @event, and expect it to crash with 137.
 */
static bool crash_on(const char *point, const char *rules, const char *event, const char *payment,
                     const char *account)
{
    char *body = te2e_payment_json(event, payment, 5000, "001", account);
    char fp[96], label[96];
    const char *env[] = {fp, rules, NULL};
    tprog w = {0};
    int status;
    bool ok;

    tcheck_context("worker.%s", point);
    snprintf(fp, sizeof fp, "GATEWAY_FAILPOINTS=worker.%s=exit", point);
    snprintf(label, sizeof label, "failpoints-%s", point);

    ok = CHECK(te2e_insert_payment(e.db, event, payment, 5000, "001", account)) &&
         CHECK(tprog_start(&w, TPROG_WORKER, label, &e, env)) &&
         CHECK(te2e_publish_event(mq, event, body));
    free(body);
    if (!ok) {
        tprog_free(&w);
        return false;
    }
    status = tproc_wait_exit(w.proc, CRASH_MS);
    CHECK_INT(status, 137);
    CHECK(tproc_log_contains(w.proc, "event=failpoint_exit"));
    if (status != 137)
        tproc_print_log_tail(w.proc, 30);
    tprog_free(&w);
    return status == 137;
}

static void after_commit(void)
{
    tprog w = {0};

    if (!crash_on("after_commit", NULL, "evt-fp-ac", "pay-fp-ac", "1234-5"))
        return;
    check_effects("evt-fp-ac", 1, 2); /* committed before the crash, not acked */
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE event_id = 'evt-fp-ac' "
                       "AND status = 'settled'",
                       NULL),
              1);
    CHECK_INT(tmq_wait_depth(mq, "payments.settlement", 1, 5000), 1);

    if (!CHECK(tprog_start(&w, TPROG_WORKER, "failpoints-after_commit-restart", &e, NULL)))
        return;
    CHECK_INT(te2e_wait_metric(&w, 1, "paygw_worker_duplicates_skipped_total", 1, SETTLE_MS), 1);
    CHECK_INT(tprog_metric(&w, "paygw_worker_redelivered_total"), 1);
    CHECK_INT(tprog_metric(&w, "paygw_worker_settled_total"), 0);
    check_effects("evt-fp-ac", 1, 2);
    CHECK_INT(tmq_wait_depth(mq, "payments.settlement", 0, 5000), 0);
    tprog_stop(&w, 10000);
    tcheck_context_clear();
}

static void before_commit(void)
{
    tprog w = {0};

    if (!crash_on("before_commit", NULL, "evt-fp-bc", "pay-fp-bc", "1234-5"))
        return;
    check_effects("evt-fp-bc", 0, 0); /* nothing committed */
    CHECK_SQL_STR(e.db,
                  "SELECT status || '/' || attempts FROM payments WHERE event_id = 'evt-fp-bc'",
                  "published/0");
    CHECK_INT(tmq_wait_depth(mq, "payments.settlement", 1, 5000), 1);

    if (!CHECK(tprog_start(&w, TPROG_WORKER, "failpoints-before_commit-restart", &e, NULL)))
        return;
    CHECK_INT(te2e_wait_metric(&w, 1, "paygw_worker_settled_total", 1, SETTLE_MS), 1);
    CHECK_INT(tprog_metric(&w, "paygw_worker_duplicates_skipped_total"), 0);
    check_effects("evt-fp-bc", 1, 2);
    CHECK_SQL_STR(e.db,
                  "SELECT status || '/' || attempts FROM payments WHERE event_id = 'evt-fp-bc'",
                  "settled/1");
    CHECK_INT(tmq_wait_depth(mq, "payments.settlement", 0, 5000), 0);
    tprog_stop(&w, 10000);
    tcheck_context_clear();
}

static void after_retry_publish(void)
{
    const char *env2[] = {RULES, NULL};
    tprog w = {0};
    long long t0;

    if (!crash_on("after_retry_publish", RULES, "evt-fp-rp", "pay-fp-rp", "7777-7"))
        return;
    /* the copy is in its delay queue (or already back), the original is back in the queue */
    CHECK_SQL_STR(e.db,
                  "SELECT status || '/' || attempts FROM payments WHERE event_id = 'evt-fp-rp'",
                  "retrying/1");
    CHECK_INT(count_for("inbox", "evt-fp-rp"), 0);
    {
        long long deadline = tproc_now_ms() + 5000;
        long total = 0;

        while (tproc_now_ms() < deadline) {
            total = tmq_depth(mq, "payments.settlement") + tmq_depth(mq, "payments.retry.1000");
            if (total == 2)
                break;
            tproc_sleep_ms(20);
        }
        CHECK_INT(total, 2); /* the original and its confirmed copy */
    }

    t0 = tproc_now_ms();
    if (!CHECK(tprog_start(&w, TPROG_WORKER, "failpoints-after_retry_publish-restart", &e, env2)))
        return;
    CHECK_WAIT_LONG(e.db,
                    "SELECT count(*) FROM payments WHERE event_id = 'evt-fp-rp' "
                    "AND status = 'settled'",
                    1, SETTLE_MS, 20);
    /* the other copy arrives as a duplicate, at the latest one delay later */
    CHECK_INT(te2e_wait_metric(&w, 1, "paygw_worker_duplicates_skipped_total", 1, SETTLE_MS), 1);
    printf("after_retry_publish: settled and the duplicate skipped %.2f s after the restart\n",
           te2e_elapsed_s(t0));
    CHECK_INT(tmq_wait_depth(mq, "payments.settlement", 0, 5000), 0);
    CHECK_INT(tmq_wait_depth(mq, "payments.retry.1000", 0, 5000), 0);
    CHECK_INT(tmq_depth(mq, "payments.retry.5000"), 0);
    CHECK_INT(tprog_metric(&w, "paygw_worker_settled_total"), 1);
    check_effects("evt-fp-rp", 1, 2);
    CHECK_SQL_STR(e.db,
                  "SELECT status || '/' || attempts FROM payments WHERE event_id = 'evt-fp-rp'",
                  "settled/2");
    CHECK_INT(tdb_long(e.db, "SELECT attempt FROM inbox WHERE event_id = 'evt-fp-rp'", NULL), 2);
    tprog_stop(&w, 10000);
    tcheck_context_clear();
}

static void run(void)
{
    mq = tmq_connect(e.amqp_url);
    if (!CHECK(mq != NULL))
        return;
    after_commit();
    before_commit();
    after_retry_publish();
    /* across the three: three effects, nothing dead-lettered */
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), 3);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 6);
    CHECK_INT(tmq_depth(mq, "payments.settlement.dlq"), 0);
    tmq_close(mq);
}

int main(void)
{
    return te2e_main("worker_failpoints", &e, run);
}
