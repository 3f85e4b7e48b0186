/*
 * tests/banksim/test_worker_bank_http.c - the worker settles through the HTTP bank (contract
 * section 12), exactly once even when the bank's answer is lost
 *
 * payments-banksim with a store, faults by payee account, and the relay, the
 * worker (BANK_URL, BANK_TIMEOUT_MS=500, RETRY_DELAYS_MS=500,1000) and the
 * API on the test's database and vhost. Each payment ends as the table says,
 * checked at both ends: the bank lists exactly one executed transfer for it
 * (or none), the ledger holds one effect (or none), and a settled payment's
 * bank_reference is the bank's.
 *   1111-1  no fault                          -> settled on attempt 1
 *   2222-2  drop-first=2: executed, answer lost (twice: libcurl itself tries again once
 *           on a fresh connection when a kept-alive one closes unanswered) -> looked up,
 *           settled on attempt 1
 *   3333-3  late=1500: executed, answer past the timeout -> looked up, settled
 *   4444-4  5xx-first=2                        -> settled on attempt 3
 *   5555-5  permanent (422)                    -> dead_lettered, last_error names 422
 *   6666-6  late=1500: the same event published 6 times to two workers, so copies call
 *           the bank while the first call is in flight -> one transfer, one effect
 * Then the worker dies with a bank call done or open, and a new one finishes the job:
 *   7777-7  failpoint worker.after_bank_call=exit (the bank executed, nothing committed)
 *   8888-8  late=3000, the worker stopped by SIGTERM while it waits (BANK_TIMEOUT_MS=5000):
 *           settled, committed and acked before it exits
 *   8888-8  late=3000, the worker SIGKILLed while it waits (BANK_TIMEOUT_MS=5000)
 *   7777-7 and the SIGKILLed one -> settled once after the restart, with the bank's one transfer
 * Last, reconciliation: bank_agrees holds; then a transfer executed at the bank behind
 * the gateway's back, for the dead-lettered bh-422, makes it fail naming that payment.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"

#define SETTLE_MS 30000

static te2e e;
static tproc *sim;
static char sim_url[64];

/* The simulator on @port (0: any; the same store each time), so that a restart is the same bank. */
static bool sim_start(int port_wanted)
{
    const char *bin = getenv("GW_BANKSIM_BIN");
    char store[512], listen[64];
    const char *env[] = {
        listen,
        store,
        "BANK_SIM_RULES=001/5555-5:permanent",
        "BANK_SIM_FAULTS=001/2222-2:drop-first=2;001/3333-3:late=1500;001/4444-4:5xx-first=2;"
        "001/6666-6:late=1500;001/8888-8:late=3000;001/9999-9:late=2000",
        NULL,
    };
    int port;

    if (!CHECK(bin != NULL))
        return false;
    snprintf(listen, sizeof listen, "BANKSIM_LISTEN=127.0.0.1:%d", port_wanted);
    snprintf(store, sizeof store, "BANKSIM_STORE=%s/bank-%d.jsonl", tproc_tmpdir(), (int)getpid());
    sim = tproc_start(bin, env, "bank_http-banksim");
    if (!CHECK(sim != NULL))
        return false;
    port = tproc_wait_listening(sim, 10000);
    snprintf(sim_url, sizeof sim_url, "http://127.0.0.1:%d", port);
    return CHECK(port > 0);
}

/* How many transfers the bank lists as executed for @event_id (-1: no answer). */
static int bank_executed(const char *event_id, char *reference, size_t len)
{
    thttp_resp r;
    char path[160];
    int n = 0;

    reference[0] = '\0';
    snprintf(path, sizeof path, "/v1/transfers?status=executed&limit=1000");
    if (!thttp_get(sim_url, path, NULL, &r) || r.status != 200) {
        thttp_resp_free(&r);
        return -1;
    }
    json_t *items = json_object_get(r.json, "items");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *it = json_array_get(items, i);
        const char *id = json_string_value(json_object_get(it, "transfer_id"));

        if (id != NULL && strcmp(id, event_id) == 0) {
            n++;
            const char *ref = json_string_value(json_object_get(it, "bank_reference"));

            snprintf(reference, len, "%s", ref ? ref : "");
        }
    }
    thttp_resp_free(&r);
    return n;
}

/* GET /admin/reconciliation: the check bank_agrees is @ok (and names @offender). */
static void check_bank_agrees(const tapi *a, bool ok, const char *offender)
{
    thttp_resp r;
    json_t *checks, *c, *found = NULL;
    size_t i;

    thttp_get(a->url, "/admin/reconciliation", TAPI_ADMIN_TOKEN, &r);
    CHECK_INT(r.status, 200);
    checks = json_object_get(r.json, "checks");
    json_array_foreach(checks, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));

        if (name != NULL && strcmp(name, "bank_agrees") == 0)
            found = c;
    }
    if (CHECK(found != NULL)) {
        char *text = json_dumps(found, JSON_COMPACT);

        printf("bank_agrees: %s\n", text);
        free(text);
        CHECK(json_is_true(json_object_get(found, "ok")) == ok);
        if (offender != NULL)
            CHECK_STR(json_string_value(json_array_get(json_object_get(found, "offending"), 0)),
                      offender);
    }
    thttp_resp_free(&r);
}

/* A transfer for @event_id executed at the bank without the gateway. */
static void behind_our_back(const char *event_id)
{
    char body[300], key[120], url[200];
    const char *headers[] = {"Content-Type: application/json", key, NULL};
    thttp_resp r;

    snprintf(key, sizeof key, "Idempotency-Key: %s", event_id);
    snprintf(body, sizeof body,
             "{\"transfer_id\":\"%s\",\"payment_id\":\"%s\",\"method\":\"pix\","
             "\"amount_cents\":100,\"currency\":\"BRL\",\"payee\":{\"bank\":\"002\","
             "\"account\":\"1-1\"}}",
             event_id, event_id);
    snprintf(url, sizeof url, "%s/v1/transfers", sim_url);
    thttp_request("POST", url, headers, body, strlen(body), &r);
    CHECK(r.status == 201 || r.status == 200);
    thttp_resp_free(&r);
}

static void post(const tapi *a, const char *id, const char *account)
{
    char *s = tapi_payment(id, id), *body;
    json_t *o = json_loads(s, 0, NULL);
    thttp_resp r;

    free(s);
    json_object_set_new(json_object_get(o, "payee"), "account", json_string(account));
    body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    tapi_post(a, body, NULL, &r);
    CHECK_INT(r.status, 202);
    thttp_resp_free(&r);
    free(body);
}

/* The payment @id ends @status after @attempts (0: any); one bank transfer when settled. */
static void check_end(const char *id, const char *status, int attempts)
{
    char sql[200], ref[160];
    char *got, *stored;
    int executed;

    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM payments WHERE event_id = '%s' AND status = '%s'", id, status);
    CHECK_WAIT_LONG(e.db, sql, 1, SETTLE_MS, 100);
    got = tdb_value(e.db,
                    "SELECT status || '/' || attempts || '/' || coalesce(last_error, '') "
                    "FROM payments WHERE event_id = $1",
                    id, NULL);
    printf("%s: %s\n", id, got ? got : "(none)");
    if (attempts > 0)
        CHECK_INT(tdb_long(e.db, "SELECT attempts FROM payments WHERE event_id = $1", id, NULL),
                  attempts);
    executed = bank_executed(id, ref, sizeof ref);
    stored = tdb_value(
        e.db, "SELECT coalesce(bank_reference, '') FROM payments WHERE event_id = $1", id, NULL);
    if (strcmp(status, "settled") == 0) {
        CHECK_INT(executed, 1);
        CHECK_STR(stored, ref);
        CHECK_INT(
            tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = $1", id, NULL), 2);
    } else {
        CHECK_INT(executed, 0);
        CHECK_STR(stored, "");
        CHECK_INT(
            tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = $1", id, NULL), 0);
    }
    free(got);
    free(stored);
}

static void run(void)
{
    char amqp_env[600], bank_env[100];
    const char *extra[] = {bank_env, "BANK_TIMEOUT_MS=500", "RETRY_DELAYS_MS=500,1000", NULL};
    const char *api_extra[] = {amqp_env, bank_env, "RELAY_SLO_SECONDS=1", NULL};
    const char *crash[] = {bank_env, "GATEWAY_FAILPOINTS=worker.after_bank_call=exit", NULL};
    const char *patient[] = {bank_env, "BANK_TIMEOUT_MS=5000", NULL};
    tprog relay = {0}, worker = {0}, worker2 = {0};
    tapi a = {0};
    tmq *m = NULL;
    char *body;

    snprintf(amqp_env, sizeof amqp_env, "AMQP_URL=%s", e.amqp_url);
    if (!sim_start(0))
        return;
    snprintf(bank_env, sizeof bank_env, "BANK_URL=%s", sim_url);
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "bank_http-relay", &e, NULL)) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "bank_http-worker", &e, extra)) ||
        !CHECK(tapi_start(&a, "bank_http-api", tdb_url(e.db), api_extra)))
        goto stop;

    post(&a, "bh-ok", "1111-1");
    post(&a, "bh-lost", "2222-2");
    post(&a, "bh-late", "3333-3");
    post(&a, "bh-5xx", "4444-4");
    post(&a, "bh-422", "5555-5");
    check_end("bh-ok", "settled", 1);
    check_end("bh-lost", "settled", 1);
    check_end("bh-late", "settled", 1);
    check_end("bh-5xx", "settled", 3);
    check_end("bh-422", "dead_lettered", 1);
    CHECK(tdb_long(e.db,
                   "SELECT count(*) FROM payments WHERE event_id = 'bh-422' "
                   "AND last_error LIKE '%422%'",
                   NULL) == 1);

    /* the same event 6 times at once, to two workers, while the bank sits on the first call */
    m = tmq_connect(e.amqp_url);
    if (CHECK(tprog_start(&worker2, TPROG_WORKER, "bank_http-worker2", &e, extra)) &&
        CHECK(m != NULL) &&
        CHECK(te2e_insert_payment(e.db, "bh-dup", "bh-dup", 100, "001", "6666-6"))) {
        body = te2e_payment_json("bh-dup", "bh-dup", 100, "001", "6666-6");
        for (int i = 0; i < 6; i++)
            CHECK(te2e_publish_event(m, "bh-dup", body));
        free(body);
        check_end("bh-dup", "settled", 0);
    }
    CHECK(tprog_sum((tprog[]){worker, worker2}, 2,
                    "paygw_worker_bank_lookups_total{result=\"executed\"}") >= 3);
    tprog_stop(&worker2, 0);

    /* the bank answered, the worker died before its COMMIT: the redelivery asks again */
    tprog_stop(&worker, 0);
    if (CHECK(tprog_start(&worker, TPROG_WORKER, "bank_http-worker-crash", &e, crash))) {
        post(&a, "bh-crash", "7777-7");
        CHECK_INT(tproc_wait_exit(worker.proc, 15000), 137);
        tprog_free(&worker);
    }
    CHECK_INT(
        tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = 'bh-crash'", NULL), 0);
    /* SIGTERM while a call is open: the open batch is answered, committed and acked before
     * the worker exits (worker/settle/settle.c, settle_run()) */
    if (CHECK(tprog_start(&worker, TPROG_WORKER, "bank_http-worker-term", &e, patient))) {
        post(&a, "bh-term", "8888-8");
        tproc_sleep_ms(1500);
        CHECK_INT(tprog_stop(&worker, 0), 0);
        CHECK_INT(tdb_long(e.db,
                           "SELECT count(*) FROM payments WHERE event_id = 'bh-term' "
                           "AND status = 'settled' AND attempts = 1",
                           NULL),
                  1);
        CHECK_INT(
            tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = 'bh-term'", NULL),
            2);
        check_end("bh-term", "settled", 1); /* and the bank's one transfer */
    }
    /* SIGKILLed while a call is open */
    if (CHECK(tprog_start(&worker, TPROG_WORKER, "bank_http-worker-patient", &e, patient))) {
        post(&a, "bh-kill", "8888-8");
        tproc_sleep_ms(1500);
        tproc_signal(worker.proc, SIGKILL);
        tproc_wait_exit(worker.proc, 5000);
        tprog_free(&worker);
    }
    if (CHECK(tprog_start(&worker, TPROG_WORKER, "bank_http-worker-again", &e, extra))) {
        check_end("bh-crash", "settled", 0);
        check_end("bh-kill", "settled", 0);
    }
    CHECK_LEDGER_BALANCED(e.db);
    check_bank_agrees(&a, true, NULL);
    behind_our_back("bh-422");
    tproc_sleep_ms(1500); /* past RELAY_SLO_SECONDS: no call in flight explains it */
    check_bank_agrees(&a, false, "bh-422");
stop:
    tmq_close(m);
    tapi_stop(&a);
    tprog_stop(&worker, 0);
    tprog_free(&worker2);
    tprog_stop(&relay, 0);
    tproc_stop(sim, 5000);
    tproc_free(sim);
}

/*
 * Mode "down": the bank is gone (SIGKILL) for 60 s, then comes back on the same port and store.
 * RETRY_DELAYS_MS=5000,15000: attempts 5 s and 20 s after the first. T is the time since the
 * kill; every outcome falls 5 s or more from the bank's return at T=60.
 *   bd-unknown   late=2000: the bank executed it and died before answering: unknown. The bank
 *                down after that says nothing new: still `retrying` at T=59, past its 3 attempts
 *                (T=0.5, 5.5, 20.5, 35.5, 50.5), never the DLQ; settles at T=65.5, once the
 *                bank is back, with the transfer the bank made before it died.
 *   bd-dlq-1..3  posted at T=1: refused at T=1, 6 and 21, their retries run out during the
 *                outage: dead-lettered, never executed.
 *   bd-later-1..3 posted at T=45: refused at T=45 and 50; their third attempt (T=65) outlasts
 *                the outage: settled on attempt 3, one transfer each.
 * Nothing is settled while the bank is down: the ledger is looked at every second of the
 * outage. The test mostly waits (about 67 s).
 */
#define OUTAGE_MS 60000
#define DOWN_IDS  "event_id LIKE 'bd-%'"

/* Wait until @t_ms after @kill_ms (tproc_now_ms()), looking every second for a settlement; adds
 * what it sees to *@settled. */
static void outage_until(long long kill_ms, long long t_ms, long *settled)
{
    for (;;) {
        long long left = kill_ms + t_ms - tproc_now_ms();
        long long n = tdb_long(e.db,
                               "SELECT (SELECT count(*) FROM payments WHERE " DOWN_IDS
                               " AND (status = 'settled' OR bank_reference IS NOT NULL))"
                               " + (SELECT count(*) FROM ledger_entries WHERE " DOWN_IDS ")",
                               NULL);

        *settled += n != 0; /* -1 (no answer) counts too: it proves nothing */
        if (left <= 0)
            return;
        tproc_sleep_ms(left < 1000 ? (int)left : 1000);
    }
}

/* How many of the payments @prefix-1..@n are in @status with @attempts. */
static long count_ids(const char *prefix, const char *status, int attempts)
{
    char like[64], att[16];

    snprintf(like, sizeof like, "%s-%%", prefix);
    snprintf(att, sizeof att, "%d", attempts);
    return (long)tdb_long(e.db,
                          "SELECT count(*) FROM payments WHERE event_id LIKE $1 AND status = $2 "
                          "AND attempts = $3::int",
                          like, status, att, NULL);
}

static void run_down(void)
{
    char amqp_env[600], bank_env[100], id[32];
    const char *extra[] = {bank_env, "BANK_TIMEOUT_MS=500", "RETRY_DELAYS_MS=5000,15000", NULL};
    const char *api_extra[] = {amqp_env, NULL};
    tprog relay = {0}, worker = {0};
    tapi a = {0};
    long settled_while_down = 0;
    long long kill_ms, deadline;
    char *back_at = NULL;
    int port;

    snprintf(amqp_env, sizeof amqp_env, "AMQP_URL=%s", e.amqp_url);
    if (!sim_start(0))
        return;
    port = atoi(strrchr(sim_url, ':') + 1);
    snprintf(bank_env, sizeof bank_env, "BANK_URL=%s", sim_url);
    if (!CHECK(tprog_start(&relay, TPROG_RELAY, "bank_down-relay", &e, NULL)) ||
        !CHECK(tprog_start(&worker, TPROG_WORKER, "bank_down-worker", &e, extra)) ||
        !CHECK(tapi_start(&a, "bank_down-api", tdb_url(e.db), api_extra)))
        goto stop;

    /* executed and stored at the bank, whose answer waits 2 s: the bank dies in that wait */
    post(&a, "bd-unknown", "9999-9");
    deadline = tproc_now_ms() + 10000;
    for (thttp_resp r = {0}; tproc_now_ms() < deadline; tproc_sleep_ms(20)) {
        bool executed = thttp_get(sim_url, "/v1/transfers/bd-unknown", NULL, &r) && r.status == 200;

        thttp_resp_free(&r);
        if (executed)
            break;
    }
    tproc_signal(sim, SIGKILL);
    kill_ms = tproc_now_ms();
    tproc_wait_exit(sim, 5000);
    tproc_free(sim);
    sim = NULL;

    outage_until(kill_ms, 1000, &settled_while_down);
    for (int i = 1; i <= 3; i++)
        post(&a, (snprintf(id, sizeof id, "bd-dlq-%d", i), id), "1111-1");
    outage_until(kill_ms, 30000, &settled_while_down);
    /* their retries ran out with the bank still down (third attempt at T=21) */
    CHECK_INT(count_ids("bd-dlq", "dead_lettered", 3), 3);
    outage_until(kill_ms, 45000, &settled_while_down);
    for (int i = 1; i <= 3; i++)
        post(&a, (snprintf(id, sizeof id, "bd-later-%d", i), id), "1111-1");
    outage_until(kill_ms, OUTAGE_MS - 1000, &settled_while_down);
    /* past its 3 attempts, still waiting for the bank: never the DLQ */
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE event_id = 'bd-unknown' "
                       "AND status = 'retrying' AND attempts >= 3",
                       NULL),
              1);
    CHECK_INT(count_ids("bd-later", "retrying", 2), 3);
    outage_until(kill_ms, OUTAGE_MS, &settled_while_down);
    CHECK_INT(settled_while_down, 0);

    back_at = tdb_value(e.db, "SELECT now()::text", NULL);
    if (!sim_start(port))
        goto stop;
    printf("bank back %.1f s after it went down\n", (double)(tproc_now_ms() - kill_ms) / 1000);
    check_end("bd-unknown", "settled", 0);
    for (int i = 1; i <= 3; i++) {
        check_end((snprintf(id, sizeof id, "bd-later-%d", i), id), "settled", 3);
        check_end((snprintf(id, sizeof id, "bd-dlq-%d", i), id), "dead_lettered", 3);
    }
    /* settled after the bank came back, none before */
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE " DOWN_IDS " AND status = 'settled' "
                       "AND settled_at >= $1::timestamptz",
                       back_at, NULL),
              4);
    CHECK(tprog_metric(&worker, "paygw_worker_bank_calls_total{outcome=\"unknown\"}") >= 1);
    CHECK_LEDGER_BALANCED(e.db);
stop:
    free(back_at);
    tapi_stop(&a);
    tprog_stop(&worker, 0);
    tprog_stop(&relay, 0);
    if (sim != NULL) {
        tproc_stop(sim, 5000);
        tproc_free(sim);
    }
}

/*
 * Mode "open": the worker dies at its COMMIT while the next batch is open at the bank.
 * WORKER_PREFETCH=3 makes batches of one. Two payments wait in the queue before the worker
 * starts: A (8888-8, the bank answers after 3 s) and B (1111-1, at once). The worker sends A,
 * then B, then closes A; the failpoint ends it at A's COMMIT, with B sent and not committed.
 *   worker.after_commit=exit   A settled and not acked, B executed at the bank only
 *   worker.before_commit=exit  nothing committed, both executed at the bank
 * A worker started afterwards acks A's copy as a duplicate and settles B, each once.
 */
static void run_open(void)
{
    static const char *const points[2] = {"worker.after_commit", "worker.before_commit"};
    char amqp_env[600], bank_env[100], fp[80];
    const char *crash[] = {bank_env, fp, "WORKER_PREFETCH=3", "BANK_TIMEOUT_MS=5000", NULL};
    tprog worker = {0};
    tmq *m = NULL;

    snprintf(amqp_env, sizeof amqp_env, "AMQP_URL=%s", e.amqp_url);
    if (!sim_start(0) || !CHECK(tmq_declare_topology(e.amqp_url, NULL)) ||
        !CHECK((m = tmq_connect(e.amqp_url)) != NULL))
        goto stop;
    snprintf(bank_env, sizeof bank_env, "BANK_URL=%s", sim_url);
    for (int k = 0; k < 2; k++) {
        char a[32], b[32];

        tcheck_context("%s", points[k]);
        snprintf(a, sizeof a, "bo-%d-a", k);
        snprintf(b, sizeof b, "bo-%d-b", k);
        snprintf(fp, sizeof fp, "GATEWAY_FAILPOINTS=%s=exit", points[k]);
        for (int i = 0; i < 2; i++) {
            const char *id = i == 0 ? a : b, *account = i == 0 ? "8888-8" : "1111-1";
            char *body = te2e_payment_json(id, id, 100, "001", account);

            CHECK(te2e_insert_payment(e.db, id, id, 100, "001", account));
            CHECK(te2e_publish_event(m, id, body));
            free(body);
        }
        if (!CHECK(tprog_start(&worker, TPROG_WORKER, "bank_open-worker-crash", &e, crash)))
            break;
        CHECK_INT(tproc_wait_exit(worker.proc, 15000), 137);
        tprog_free(&worker);
        /* B's batch was open: its transfer is at the bank, its effect is not in the ledger */
        CHECK_INT(bank_executed(b, (char[160]){0}, 160), 1);
        CHECK_INT(
            tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = $1", b, NULL), 0);
        CHECK_INT(
            tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = $1", a, NULL),
            k == 0 ? 2 : 0);
        if (!CHECK(tprog_start(&worker, TPROG_WORKER, "bank_open-worker-again", &e,
                               (const char *[]){bank_env, NULL})))
            break;
        check_end(a, "settled", 0);
        check_end(b, "settled", 0);
        if (k == 0) /* A's redelivered copy found A in the inbox */
            CHECK(tprog_metric(&worker, "paygw_worker_duplicates_skipped_total") >= 1);
        tprog_stop(&worker, 0);
    }
    tcheck_context_clear();
    CHECK_LEDGER_BALANCED(e.db);
stop:
    tprog_stop(&worker, 0);
    tmq_close(m);
    if (sim != NULL) {
        tproc_stop(sim, 5000);
        tproc_free(sim);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "open") == 0)
        return te2e_main("worker_bank_open", &e, run_open);
    if (argc > 1 && strcmp(argv[1], "down") == 0)
        return te2e_main("worker_bank_down", &e, run_down);
    return te2e_main("worker_bank_http", &e, run);
}
