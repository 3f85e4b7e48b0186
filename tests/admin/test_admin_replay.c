/*
 * tests/admin/test_admin_replay.c - POST /admin/dlq/{id}/replay against openapi/payments.yaml
 *
 * A first worker has bank 237 down: a TED to it dead-letters after three
 * attempts; three PIX payments of R$ 0 dead-letter at once. All four are drained.
 *
 * - The cause is gone: the first worker stops. The replay of the TED answers
 *   202, the payment moves dead_lettered -> published (seen in the database
 *   while no worker runs, its message waiting in payments.settlement), a
 *   second worker without the rule starts, and it is settled with exactly one
 *   ledger effect and attempts 1 (the replayed delivery's x-attempt). The
 *   letter records replayed_at and replayed_by; a second replay is 409
 *   already-replayed.
 * - A letter older than the inbox retention (died_at set 40 days back;
 *   INBOX_RETENTION_DAYS defaults to 30) is 409 replay-window-expired and
 *   publishes nothing.
 * - Two replays of one letter at the same time: one 202, one 409.
 *   That letter (R$ 0) fails again: the next drain shows it as a NEW letter,
 *   also when the second death comes within the same second as the first.
 * - With the worker running during the replay (the usual case): a replayed
 *   payment ends settled, or dead-lettered again with its message in the DLQ,
 *   never stuck in published.
 * - A letter whose routing key no binding takes is 409 replay-unroutable and
 *   records nothing; with its key back it replays.
 * - Unknown and malformed ids are 404; the API token is 401.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"

#define WAIT_MS 30000

static te2e t;
static tapi api;
static tprog relay, worker;
static long long id_down, id_zero1, id_zero2, id_zero3, id_race;

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static long long sql_long(const char *sql, const char *param)
{
    return tdb_long(t.db, sql, param, NULL);
}

/* POST /admin/dlq/@id/replay into @r. */
static void replay(long long id, thttp_resp *r)
{
    char path[64];

    snprintf(path, sizeof path, "/admin/dlq/%lld/replay", id);
    tadm_admin(&api, "POST", path, r);
}

static bool check_202(const thttp_resp *r, long long id, const char *event_id)
{
    bool ok;

    tcheck_context("replay of letter %lld: %.400s", id, r->body);
    ok = CHECK_INT(r->status, 202);
    CHECK_STR(thttp_header(r, "Content-Type"), "application/json");
    CHECK_INT(json_integer_value(json_object_get(r->json, "id")), id);
    CHECK_STR(jstr(r->json, "event_id"), event_id);
    CHECK_STR(jstr(r->json, "status"), "replayed");
    tcheck_context_clear();
    return ok;
}

static json_t *get_letter(long long id)
{
    char path[64];
    thttp_resp r;
    json_t *l = NULL;

    snprintf(path, sizeof path, "/admin/dlq/%lld", id);
    tadm_admin(&api, "GET", path, &r);
    if (CHECK_INT(r.status, 200))
        l = json_incref(r.json);
    thttp_resp_free(&r);
    return l;
}

static void make_letters(void)
{
    thttp_resp r;
    json_t *msgs;

    if (!tadm_accept(&api, "evt-down", "pay-down", "ted", "approved", 5000, "237", "5555-0",
                     NULL) ||
        !tadm_accept(&api, "evt-zero1", "pay-zero1", "pix", "approved", 0, "001", "1234-5", NULL) ||
        !tadm_accept(&api, "evt-zero2", "pay-zero2", "pix", "approved", 0, "001", "1234-5", NULL) ||
        !tadm_accept(&api, "evt-zero3", "pay-zero3", "pix", "approved", 0, "001", "1234-5", NULL))
        return;
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 4, WAIT_MS), 4);
    if (tadm_drain(&api, 10, &r)) {
        msgs = json_object_get(r.json, "messages");
        CHECK_INT(json_array_size(msgs), 4);
        id_down = tadm_id(tadm_letter_for(msgs, "evt-down"));
        id_zero1 = tadm_id(tadm_letter_for(msgs, "evt-zero1"));
        id_zero2 = tadm_id(tadm_letter_for(msgs, "evt-zero2"));
        id_zero3 = tadm_id(tadm_letter_for(msgs, "evt-zero3"));
        CHECK(id_down > 0 && id_zero1 > 0 && id_zero2 > 0 && id_zero3 > 0);
    }
    thttp_resp_free(&r);
}

static void replay_when_the_cause_is_gone(void)
{
    thttp_resp r, pay;
    json_t *l;
    char *s;

    if (!CHECK(id_down > 0))
        return;
    /* the bank is back: the worker that had the rule goes, none runs during the replay */
    tprog_stop(&worker, 0);
    replay(id_down, &r);
    check_202(&r, id_down, "evt-down");
    thttp_resp_free(&r);
    s = tadm_status(t.db, "pay-down");
    CHECK_STR(s, "published");
    free(s);
    CHECK_INT(tadm_wait_depth(&t, TADM_SETTLEMENT, 1, 5000), 1);

    if (!CHECK(tadm_prog_start(&worker, TPROG_WORKER, "replay-worker-2", &t, NULL)))
        return;
    CHECK_WAIT_LONG(t.db,
                    "SELECT count(*) FROM payments WHERE payment_id = 'pay-down' "
                    "AND status = 'settled'",
                    1, WAIT_MS, 25);
    /* exactly one balanced effect, from the replayed delivery */
    CHECK_INT(sql_long("SELECT count(*) FROM ledger_entries WHERE event_id = $1", "evt-down"), 2);
    CHECK_INT(sql_long("SELECT count(*) FROM ledger_entries WHERE event_id = $1 AND "
                       "side = 'debit' AND amount_cents = 5000",
                       "evt-down"),
              1);
    CHECK_INT(sql_long("SELECT count(*) FROM inbox WHERE event_id = $1", "evt-down"), 1);
    CHECK_INT(sql_long("SELECT attempt FROM inbox WHERE event_id = $1", "evt-down"), 1);
    tapi_get(&api, "/v1/payments/pay-down", &pay);
    tcheck_context("GET /v1/payments/pay-down: %.400s", pay.body);
    if (CHECK_INT(pay.status, 200)) {
        CHECK_STR(jstr(pay.json, "status"), "settled");
        CHECK_INT(json_integer_value(json_object_get(pay.json, "attempts")), 1);
        CHECK(json_is_null(json_object_get(pay.json, "last_error")));
        CHECK(tadm_is_date_time(jstr(pay.json, "settled_at")));
    }
    tcheck_context_clear();
    thttp_resp_free(&pay);

    /* who and when */
    l = get_letter(id_down);
    tcheck_context("letter %lld after its replay: %s", id_down, tadm_dump(l));
    CHECK(tadm_is_date_time(jstr(l, "replayed_at")));
    CHECK(jstr(l, "replayed_by") != NULL && *jstr(l, "replayed_by") != '\0');
    tcheck_context_clear();
    json_decref(l);

    /* once only */
    replay(id_down, &r);
    CHECK_PROBLEM(&r, 409, "already-replayed");
    thttp_resp_free(&r);
    CHECK_INT(tadm_depth(&t, TADM_SETTLEMENT), 0);
    CHECK_INT(sql_long("SELECT count(*) FROM ledger_entries WHERE event_id = $1", "evt-down"), 2);
}

static void replay_window(void)
{
    char id[24], *s;
    thttp_resp r;
    json_t *l;

    if (!CHECK(id_zero2 > 0))
        return;
    snprintf(id, sizeof id, "%lld", id_zero2);
    CHECK(tdb_exec(t.db,
                   "UPDATE dead_letters SET died_at = now() - interval '40 days' "
                   "WHERE id = $1::bigint",
                   id, NULL));
    replay(id_zero2, &r);
    CHECK_PROBLEM(&r, 409, "replay-window-expired");
    thttp_resp_free(&r);
    l = get_letter(id_zero2);
    CHECK(json_is_null(json_object_get(l, "replayed_at")));
    json_decref(l);
    s = tadm_status(t.db, "pay-zero2");
    CHECK_STR(s, "dead_lettered");
    free(s);
    /* nothing was published: nothing comes back to the DLQ */
    tproc_sleep_ms(500);
    CHECK_INT(tadm_depth(&t, TADM_DLQ), 0);
    CHECK_INT(tadm_depth(&t, TADM_SETTLEMENT), 0);
}

typedef struct racer {
    long long id;
    thttp_resp r;
} racer;

static void *race(void *arg)
{
    racer *x = arg;

    replay(x->id, &x->r);
    return NULL;
}

static void replay_twice_at_once_then_dead_again(void)
{
    racer a = {.id = id_zero1}, b = {.id = id_zero1};
    pthread_t ta, tb;
    long long newest;
    thttp_resp r;
    json_t *l;

    if (!CHECK(id_zero1 > 0))
        return;
    newest = sql_long("SELECT max(id) FROM dead_letters", NULL);
    pthread_create(&ta, NULL, race, &a);
    pthread_create(&tb, NULL, race, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    tcheck_context("two replays at once: %ld %.200s / %ld %.200s", a.r.status, a.r.body, b.r.status,
                   b.r.body);
    CHECK((a.r.status == 202 && b.r.status == 409) || (a.r.status == 409 && b.r.status == 202));
    CHECK_PROBLEM(a.r.status == 409 ? &a.r : &b.r, 409, "already-replayed");
    tcheck_context_clear();
    thttp_resp_free(&a.r);
    thttp_resp_free(&b.r);

    /* R$ 0 fails again: one new letter on the next drain, the old one stays replayed */
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, WAIT_MS), 1);
    if (tadm_drain(&api, 10, &r)) {
        CHECK_INT(json_integer_value(json_object_get(r.json, "drained")), 1);
        l = json_array_get(json_object_get(r.json, "messages"), 0);
        tcheck_context("the replay's own dead letter: %s", tadm_dump(l));
        CHECK(tadm_id(l) > newest);
        CHECK_STR(jstr(l, "event_id"), "evt-zero1");
        CHECK_INT(json_integer_value(json_object_get(l, "attempt")), 1);
        CHECK_STR(jstr(l, "first_death_reason"), "rejected");
        CHECK(json_is_null(json_object_get(l, "replayed_at")));
        tcheck_context_clear();
    }
    thttp_resp_free(&r);
    CHECK_INT(sql_long("SELECT count(*) FROM dead_letters WHERE event_id = $1", "evt-zero1"), 2);
    CHECK_INT(sql_long("SELECT count(*) FROM dead_letters WHERE event_id = $1 "
                       "AND replayed_at IS NOT NULL",
                       "evt-zero1"),
              1);
    CHECK_WAIT_LONG(t.db,
                    "SELECT count(*) FROM payments WHERE payment_id = 'pay-zero1' "
                    "AND status = 'dead_lettered'",
                    1, 5000, 25);
}

/*
 * A replay that fails again quickly: the new death must be a new letter even
 * when it happens within the same second as the first one (x-death times
 * have a resolution of one second, and the replayed message carries the same
 * message_id, body and x-attempt as the original). Started just after a
 * second boundary, so that the whole round usually fits in that second.
 */
static void replay_fails_again_within_a_second(void)
{
    long long first = -1, second = -1, t0;
    struct timespec now;
    thttp_resp r;
    json_t *l;

    do {
        clock_gettime(CLOCK_REALTIME, &now);
        tproc_sleep_ms(5);
    } while (now.tv_nsec > 30 * 1000000L);
    t0 = tproc_now_ms();
    if (!tadm_accept(&api, "evt-quick", "pay-quick", "pix", "approved", 0, "001", "1234-5", NULL))
        return;
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, WAIT_MS), 1);
    if (tadm_drain(&api, 10, &r))
        first = tadm_id(tadm_letter_for(json_object_get(r.json, "messages"), "evt-quick"));
    thttp_resp_free(&r);
    if (!CHECK(first > 0))
        return;
    replay(first, &r);
    check_202(&r, first, "evt-quick");
    thttp_resp_free(&r);
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, WAIT_MS), 1);
    if (tadm_drain(&api, 10, &r)) {
        CHECK_INT(json_integer_value(json_object_get(r.json, "drained")), 1);
        l = tadm_letter_for(json_object_get(r.json, "messages"), "evt-quick");
        second = tadm_id(l);
        tcheck_context("accept, dead letter, drain, replay, dead letter again in %lld ms: the "
                       "second drain answered %s",
                       tproc_now_ms() - t0, tadm_dump(l));
        CHECK(second > first);
        CHECK(json_is_null(json_object_get(l, "replayed_at")));
        tcheck_context_clear();
    }
    thttp_resp_free(&r);
    printf("the replayed R$ 0 payment was dead-lettered again %lld ms after its accept\n",
           tproc_now_ms() - t0);
    CHECK_INT(sql_long("SELECT count(*) FROM dead_letters WHERE event_id = $1", "evt-quick"), 2);
    CHECK_INT(tadm_depth(&t, TADM_DLQ), 0);
}

/*
 * The replay publishes, then marks the payment published. With a worker
 * consuming, the worker may see the message before that mark is committed.
 * Whatever the order, the payment must not stay `published` with no message
 * anywhere: it ends settled (bank back) or dead-lettered (R$ 0) again.
 */
static void replay_with_the_worker_running(void)
{
    thttp_resp r;
    char *s;

    if (!CHECK(id_zero3 > 0))
        return;
    /* R$ 0 again: the worker dead-letters it at once */
    replay(id_zero3, &r);
    check_202(&r, id_zero3, "evt-zero3");
    thttp_resp_free(&r);
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, 10000), 1);
    tproc_sleep_ms(300); /* the replay's own UPDATE, if it comes late */
    s = tadm_status(t.db, "pay-zero3");
    tcheck_context("pay-zero3 after its replay failed again (its message is in the DLQ)");
    CHECK_STR(s, "dead_lettered");
    tcheck_context_clear();
    free(s);

    /* a payment whose bank is back: a fresh one dead-lettered by a worker with the rule */
    tprog_stop(&worker, 0);
    if (!CHECK(tadm_prog_start(&worker, TPROG_WORKER, "replay-worker-3", &t,
                               (const char *const[]){"BANK_SIM_RULES=341/*:permanent", NULL})) ||
        !tadm_accept(&api, "evt-race", "pay-race", "pix", "approved", 700, "341", "77-7", NULL))
        return;
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 2, WAIT_MS), 2);
    tprog_stop(&worker, 0);
    if (tadm_drain(&api, 10, &r))
        id_race = tadm_id(tadm_letter_for(json_object_get(r.json, "messages"), "evt-race"));
    thttp_resp_free(&r);
    if (!CHECK(id_race > 0) ||
        !CHECK(tadm_prog_start(&worker, TPROG_WORKER, "replay-worker-4", &t, NULL)))
        return;
    replay(id_race, &r);
    check_202(&r, id_race, "evt-race");
    thttp_resp_free(&r);
    tcheck_context("pay-race replayed while the worker runs (the bank is back)");
    CHECK_WAIT_LONG(t.db,
                    "SELECT count(*) FROM payments WHERE payment_id = 'pay-race' "
                    "AND status = 'settled'",
                    1, 10000, 25);
    CHECK_INT(sql_long("SELECT count(*) FROM ledger_entries WHERE event_id = $1", "evt-race"), 2);
    tcheck_context_clear();
    s = tadm_status(t.db, "pay-race");
    if (s != NULL && strcmp(s, "settled") != 0)
        fprintf(stderr, "    pay-race is %s; the worker's log: %s\n", s,
                tproc_log_path(worker.proc));
    free(s);
}

static void unknown_ids(void)
{
    static const char *const paths[] = {"/admin/dlq/987654/replay",
                                        "/admin/dlq/abc/replay",
                                        "/admin/dlq/0/replay",
                                        "/admin/dlq/-3/replay",
                                        "/admin/dlq/99999999999999999999/replay",
                                        NULL};
    char path[64];
    thttp_resp r;

    for (const char *const *p = paths; *p != NULL; p++) {
        tadm_admin(&api, "POST", *p, &r);
        tcheck_context("POST %s: %.300s", *p, r.body);
        CHECK_PROBLEM(&r, 404, "not-found");
        thttp_resp_free(&r);
    }
    tcheck_context_clear();
    snprintf(path, sizeof path, "/admin/dlq/%lld/replay", id_zero2);
    CHECK_UNAUTHORIZED(&api, "POST", path, TAPI_TOKEN, false);
    tadm_admin(&api, "GET", path, &r);
    CHECK_PROBLEM(&r, 405, "method-not-allowed");
    CHECK_STR(thttp_header(&r, "Allow"), "POST");
    thttp_resp_free(&r);
}

/*
 * A letter whose routing key no binding takes any more (here a refused
 * decision's, set in SQL): the broker returns the replay, the answer is 409
 * replay-unroutable, and nothing is recorded: the letter is not replayed and
 * its payment stays dead_lettered, so a replay after the binding is back works.
 */
static void replay_unroutable(void)
{
    long long id = -1;
    thttp_resp r;
    char idtxt[32];
    char *s;

    if (!tadm_accept(&api, "evt-unroutable", "pay-unroutable", "pix", "approved", 0, "001",
                     "1234-5", NULL))
        return;
    /* drained until its letter is there (an earlier test's letters may come first) */
    for (long long t0 = tproc_now_ms(); id <= 0 && tproc_now_ms() - t0 < WAIT_MS;) {
        if (tadm_drain(&api, 10, &r))
            id = tadm_id(tadm_letter_for(json_object_get(r.json, "messages"), "evt-unroutable"));
        thttp_resp_free(&r);
        if (id <= 0)
            tproc_sleep_ms(100);
    }
    if (!CHECK(id > 0))
        return;
    snprintf(idtxt, sizeof idtxt, "%lld", id);
    CHECK(tdb_exec(t.db,
                   "UPDATE dead_letters SET routing_key = 'payment.pix.refused' WHERE id = $1",
                   idtxt, NULL));
    replay(id, &r);
    CHECK_PROBLEM(&r, 409, "replay-unroutable");
    thttp_resp_free(&r);
    CHECK_INT(sql_long("SELECT count(*) FROM dead_letters WHERE event_id = $1 "
                       "AND replayed_at IS NULL AND replayed_by IS NULL",
                       "evt-unroutable"),
              1);
    s = tadm_status(t.db, "pay-unroutable");
    CHECK_STR(s, "dead_lettered");
    free(s);
    /* with its key back, the same letter replays (and, R$ 0, dies again) */
    CHECK(tdb_exec(t.db,
                   "UPDATE dead_letters SET routing_key = 'payment.pix.approved' WHERE id = $1",
                   idtxt, NULL));
    replay(id, &r);
    check_202(&r, id, "evt-unroutable");
    thttp_resp_free(&r);
}

static void tests(void)
{
    TRUN(make_letters);
    TRUN(replay_when_the_cause_is_gone);
    TRUN(replay_window);
    TRUN(replay_twice_at_once_then_dead_again);
    TRUN(replay_fails_again_within_a_second);
    TRUN(replay_with_the_worker_running);
    TRUN(replay_unroutable);
    TRUN(unknown_ids);
}

int main(void)
{
    static const char *const worker_env[] = {TADM_BANK_237_DOWN, NULL};

    return tadm_main("admin_replay", &t, &relay, &worker, &api, worker_env, tests);
}
