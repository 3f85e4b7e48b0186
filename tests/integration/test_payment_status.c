/*
 * tests/integration/test_payment_status.c - a payment's status has one owner
 *
 * docs/architecture.md, "Status": accepted -> published|unroutable -> retrying ->
 * settled|dead_lettered; a replay from the DLQ may move dead_lettered back to
 * published; a late writer never regresses it. The table below is written here
 * from that sentence, not copied from sql/0013.
 *
 * - test_table: payment_may_move() over all 36 (from, to) pairs, for an
 *   ordinary writer and for the replay, against the table.
 * - test_writers: every real writer's statement (the texts the programs prepare,
 *   from shared/payment_status.h, and settle_batch()/settle_payment()) run on a
 *   payment in each of the six statuses: an allowed move happens, any other
 *   leaves the whole row as it was (and writes no inbox row or ledger line), and
 *   no statement fails.
 * - test_late_writers: a payment walked through a life by the real writers, with
 *   a late writer after each step.
 * - test_dead_mark_waits_for_replay: the worker's dead_lettered mark waits for a
 *   replay in flight and then dead-letters the replayed payment again.
 * - test_every_writer_asks_the_owner: each statement and each SQL function that
 *   UPDATEs payments names payment_may_move().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "shared/payment_status.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/tproc.h"

enum { ACCEPTED, PUBLISHED, UNROUTABLE, RETRYING, SETTLED, DEAD_LETTERED, NSTATUS };

static const char *const status_name[NSTATUS] = {
    "accepted", "published", "unroutable", "retrying", "settled", "dead_lettered",
};

/*
 * may_move[from][to] for every writer but the replay. Forward along the contract's
 * arrows, skipping ahead allowed (the worker can finish before the relay's mark
 * commits); never back, never sideways (published/unroutable, settled/dead_lettered).
 * Same-status moves: retrying -> retrying (each retry records its attempt) and
 * dead_lettered -> dead_lettered (the worker's mark must match a dead-lettered row to
 * wait for a replay in flight: test_dead_mark_waits_for_replay).
 */
/* clang-format off */
static const bool may_move[NSTATUS][NSTATUS] = {
    /* to:             accepted published unroutable retrying settled dead_lettered */
    [ACCEPTED]      = {false,   true,     true,      true,    true,   true},
    [PUBLISHED]     = {false,   false,    false,     true,    true,   true},
    [UNROUTABLE]    = {false,   false,    false,     true,    true,   true},
    [RETRYING]      = {false,   false,    false,     true,    true,   true},
    [SETTLED]       = {false,   false,    false,     false,   false,  false},
    [DEAD_LETTERED] = {false,   false,    false,     false,   false,  true},
};
/* clang-format on */

/* The replay moves dead_lettered -> published and nothing else. */
static bool replay_may_move(int from, int to)
{
    return from == DEAD_LETTERED && to == PUBLISHED;
}

static tdb *db;
static PGconn *conn;

/* @sql with text parameters; the result when its status is COMMAND_OK or TUPLES_OK, else NULL. */
static PGresult *run(const char *what, const char *sql, int n, const char *const *params)
{
    PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        FAIL("%s: %s", what, PQerrorMessage(conn));
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Row 0, column 0 of @sql as a new string ("" when no row), NULL on error. */
static char *value(const char *sql, int n, const char *const *params)
{
    PGresult *res = run(sql, sql, n, params);
    char *v;

    if (res == NULL)
        return NULL;
    v = strdup(PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return v;
}

static void test_table(void)
{
    PGresult *res;

    for (int from = 0; from < NSTATUS; from++) {
        for (int to = 0; to < NSTATUS; to++) {
            const char *p[3] = {status_name[from], status_name[to], NULL};
            char *plain, *ordinary, *replay;

            tcheck_context("%s -> %s", status_name[from], status_name[to]);
            plain = value("SELECT payment_may_move($1, $2)", 2, p);
            p[2] = "false";
            ordinary = value("SELECT payment_may_move($1, $2, $3::boolean)", 3, p);
            p[2] = "true";
            replay = value("SELECT payment_may_move($1, $2, $3::boolean)", 3, p);
            CHECK_STR(plain, may_move[from][to] ? "t" : "f");
            CHECK_STR(ordinary, may_move[from][to] ? "t" : "f");
            CHECK_STR(replay, replay_may_move(from, to) ? "t" : "f");
            free(plain);
            free(ordinary);
            free(replay);
        }
    }
    tcheck_context_clear();
    /* inlined into the writers' WHERE clauses: immutable, parallel safe, one SQL expression */
    res = run("pg_proc",
              "SELECT provolatile, proparallel, l.lanname FROM pg_proc p "
              "JOIN pg_language l ON l.oid = p.prolang WHERE proname = 'payment_may_move'",
              0, NULL);
    if (res != NULL && CHECK_INT(PQntuples(res), 1)) {
        CHECK_STR(PQgetvalue(res, 0, 0), "i");
        CHECK_STR(PQgetvalue(res, 0, 1), "s");
        CHECK_STR(PQgetvalue(res, 0, 2), "sql");
    }
    PQclear(res);
}

/* ---- the writers ----------------------------------------------------------------------- */

typedef enum writer_kind {
    W_PUBLISHED,  /* relay: outbox_published */
    W_UNROUTABLE, /* relay: outbox_unroutable */
    W_RETRYING,   /* worker: mark_retrying */
    W_DEAD,       /* worker: mark_dead */
    W_SETTLE_BATCH,
    W_SETTLE_PAYMENT,
    W_REPLAY, /* api: the admin replay's mark */
    NWRITERS
} writer_kind;

static const struct {
    const char *name;
    int to;
} writers[NWRITERS] = {
    [W_PUBLISHED] = {"relay outbox_published", PUBLISHED},
    [W_UNROUTABLE] = {"relay outbox_unroutable", UNROUTABLE},
    [W_RETRYING] = {"worker mark_retrying", RETRYING},
    [W_DEAD] = {"worker mark_dead", DEAD_LETTERED},
    [W_SETTLE_BATCH] = {"worker settle_batch()", SETTLED},
    [W_SETTLE_PAYMENT] = {"settle_payment()", SETTLED},
    [W_REPLAY] = {"admin replay", PUBLISHED},
};

typedef struct pay {
    char payment_id[48], event_id[48];
    char outbox_id[24], letter_id[24]; /* the pending outbox row, the stored dead letter */
} pay;

/* A payment in status @from with its pending outbox row and a stored dead letter. */
static bool pay_new(pay *p, const char *tag, int from)
{
    const char *params[3] = {p->payment_id, p->event_id, status_name[from]};
    char *v;

    snprintf(p->payment_id, sizeof p->payment_id, "pay-%s", tag);
    snprintf(p->event_id, sizeof p->event_id, "evt-%s", tag);
    /* set up directly, as the table's "from": the writers under test move it from here */
    v = value("INSERT INTO payments (payment_id, event_id, method, decision, amount_cents, "
              "currency, payee_bank, payee_account, status, attempts, last_error, updated_at) "
              "VALUES ($1, $2, 'pix', 'approved', 1500, 'BRL', '001', '1234-5', $3, 1, "
              "'before', '2000-01-01T00:00:00Z') RETURNING payment_id",
              3, params);
    if (v == NULL)
        return false;
    free(v);
    v = value("INSERT INTO outbox (event_id, payment_id, routing_key, body) "
              "VALUES ($2, $1, 'payment.pix.approved', '{}') RETURNING id",
              2, params);
    if (v == NULL)
        return false;
    snprintf(p->outbox_id, sizeof p->outbox_id, "%s", v);
    free(v);
    v = value("INSERT INTO dead_letters (dedupe_key, event_id, payment_id, headers, body, "
              "body_is_json) VALUES (convert_to($2, 'UTF8'), $2, $1, '{}', '\\x7b7d', true) "
              "RETURNING id",
              2, params);
    if (v == NULL)
        return false;
    snprintf(p->letter_id, sizeof p->letter_id, "%s", v);
    free(v);
    return true;
}

/* The payment's whole row as JSON text (new string), NULL on error. */
static char *pay_row(const pay *p)
{
    const char *params[1] = {p->payment_id};

    return value("SELECT row_to_json(p)::text FROM payments p WHERE payment_id = $1", 1, params);
}

static char *pay_status(const pay *p)
{
    const char *params[1] = {p->payment_id};

    return value("SELECT status FROM payments WHERE payment_id = $1", 1, params);
}

/* Inbox rows plus ledger lines of the payment's event. */
static long pay_effects(const pay *p)
{
    const char *params[1] = {p->event_id};
    char *v = value("SELECT (SELECT count(*) FROM inbox WHERE event_id = $1) + "
                    "(SELECT count(*) FROM ledger_entries WHERE event_id = $1)",
                    1, params);
    long n = v ? atol(v) : -1;

    free(v);
    return n;
}

/*
 * writer_run - run writer @w's real statement on @p with attempt @attempt. For the
 * settle functions, *@outcome gets the outcome (new string). False when the
 * statement failed: a refused move must never be an error.
 */
static bool writer_run(writer_kind w, const pay *p, int attempt, char **outcome)
{
    char att[12], ids[32], item[200];
    PGresult *res = NULL;

    snprintf(att, sizeof att, "%d", attempt);
    switch (w) {
    case W_PUBLISHED: {
        const char *params[1] = {ids};

        snprintf(ids, sizeof ids, "{%s}", p->outbox_id);
        res = run(writers[w].name, PAYMENT_STATUS_SQL_PUBLISHED, 1, params);
        break;
    }
    case W_UNROUTABLE: {
        const char *params[2] = {p->outbox_id, "NO_ROUTE"};

        res = run(writers[w].name, PAYMENT_STATUS_SQL_UNROUTABLE, 2, params);
        break;
    }
    case W_RETRYING:
    case W_DEAD: {
        const char *params[4] = {p->payment_id, p->event_id, att, "bank busy"};

        res = run(writers[w].name,
                  w == W_RETRYING ? PAYMENT_STATUS_SQL_RETRYING : PAYMENT_STATUS_SQL_DEAD_LETTERED,
                  4, params);
        break;
    }
    case W_SETTLE_BATCH: {
        const char *params[1] = {item};

        snprintf(item, sizeof item, "[{\"event_id\":\"%s\",\"payment_id\":\"%s\",\"attempt\":%s}]",
                 p->event_id, p->payment_id, att);
        res = run(writers[w].name, "SELECT outcome FROM settle_batch($1::jsonb)", 1, params);
        break;
    }
    case W_SETTLE_PAYMENT: {
        const char *params[3] = {p->event_id, p->payment_id, att};

        res =
            run(writers[w].name, "SELECT outcome FROM settle_payment($1, $2, $3::int)", 3, params);
        break;
    }
    case W_REPLAY: {
        const char *params[3] = {p->letter_id, "admin", p->event_id};

        res = run(writers[w].name, PAYMENT_STATUS_SQL_REPLAYED, 3, params);
        break;
    }
    case NWRITERS:
        break;
    }
    if (res == NULL)
        return false;
    if (outcome != NULL)
        *outcome = strdup(PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "(no row)");
    PQclear(res);
    return true;
}

static void test_writers(void)
{
    for (int w = 0; w < NWRITERS; w++) {
        int to = writers[w].to;
        bool settles = w == W_SETTLE_BATCH || w == W_SETTLE_PAYMENT;

        for (int from = 0; from < NSTATUS; from++) {
            bool allowed = w == W_REPLAY ? replay_may_move(from, to) : may_move[from][to];
            char tag[40], *before, *after, *status, *outcome = NULL;
            pay p;

            tcheck_context("%s on %s (%s)", writers[w].name, status_name[from],
                           allowed ? "allowed" : "refused");
            snprintf(tag, sizeof tag, "w%d-%s", w, status_name[from]);
            if (!pay_new(&p, tag, from))
                continue;
            before = pay_row(&p);
            if (CHECK(writer_run((writer_kind)w, &p, 2, settles ? &outcome : NULL))) {
                after = pay_row(&p);
                status = pay_status(&p);
                if (allowed) {
                    CHECK_STR(status, status_name[to]);
                    CHECK_NOT_CONTAINS(after, "\"updated_at\":\"2000-01-01");
                } else {
                    CHECK_STR(after, before); /* not a column touched */
                }
                if (settles) {
                    CHECK_STR(outcome, allowed                 ? "settled"
                                       : from == DEAD_LETTERED ? "terminal"
                                                               : "duplicate");
                    CHECK_INT(pay_effects(&p), allowed ? 3 : 0); /* inbox + debit + credit */
                }
                if (w == W_RETRYING && allowed)
                    CHECK_CONTAINS(after, "\"attempts\":2");
                free(after);
                free(status);
            }
            free(before);
            free(outcome);
        }
    }
    tcheck_context_clear();
}

/* One step of a walk: writer @w with attempt @attempt, then the status must be @want. */
typedef struct walk_step {
    writer_kind w;
    int attempt;
    const char *want;
} walk_step;

#define WALK_MAX 12

/* Each walk starts from a new accepted payment; the first wrong status ends it. */
static const struct walk {
    const char *tag, *why;
    walk_step steps[WALK_MAX]; /* ends at the first want == NULL */
} walks[] = {
    {"late-a",
     "the worker settles before the relay's mark commits: every late writer is a no-op",
     {{W_SETTLE_BATCH, 1, "settled"},
      {W_PUBLISHED, 1, "settled"},
      {W_RETRYING, 2, "settled"},
      {W_DEAD, 2, "settled"},
      {W_REPLAY, 1, "settled"},
      {W_SETTLE_PAYMENT, 2, "settled"}}},
    {"late-b",
     "dead-lettered: only the replay moves it back, and its life goes on from published",
     {{W_DEAD, 1, "dead_lettered"},
      {W_PUBLISHED, 1, "dead_lettered"},
      {W_UNROUTABLE, 1, "dead_lettered"},
      {W_RETRYING, 2, "dead_lettered"},
      {W_SETTLE_BATCH, 2, "dead_lettered"},
      {W_REPLAY, 1, "published"},
      {W_REPLAY, 1, "published"},
      {W_RETRYING, 1, "retrying"},
      {W_RETRYING, 2, "retrying"},
      {W_PUBLISHED, 1, "retrying"},
      {W_SETTLE_PAYMENT, 3, "settled"},
      {W_DEAD, 3, "settled"}}},
    {"late-c",
     "published: the relay's unroutable mark cannot move it sideways",
     {{W_PUBLISHED, 1, "published"},
      {W_UNROUTABLE, 1, "published"},
      {W_RETRYING, 1, "retrying"},
      {W_DEAD, 2, "dead_lettered"},
      {W_SETTLE_PAYMENT, 2, "dead_lettered"}}},
    {"late-d",
     "unroutable is not a way to published",
     {{W_UNROUTABLE, 1, "unroutable"}, {W_PUBLISHED, 1, "unroutable"}}},
};

static void test_late_writers(void)
{
    for (size_t i = 0; i < sizeof walks / sizeof walks[0]; i++) {
        const struct walk *wk = &walks[i];
        pay p;

        if (!pay_new(&p, wk->tag, ACCEPTED))
            continue;
        for (int k = 0; k < WALK_MAX && wk->steps[k].want != NULL; k++) {
            const walk_step *st = &wk->steps[k];
            char *status = NULL;
            bool ok;

            tcheck_context("%s (%s) step %d: %s, want %s", wk->tag, wk->why, k + 1,
                           writers[st->w].name, st->want);
            ok = CHECK(writer_run(st->w, &p, st->attempt, NULL));
            if (ok) {
                status = pay_status(&p);
                ok = CHECK_STR(status, st->want);
            }
            free(status);
            if (!ok)
                break; /* the later steps assume this one's status */
        }
    }
    tcheck_context_clear();
}

/*
 * The replay moves dead_lettered -> published, publishes, and only then commits. A
 * worker that dead-letters the replayed message meanwhile must wait for that COMMIT
 * and then move published -> dead_lettered; had its mark not matched the committed
 * dead_lettered row, it would not wait, change nothing, and leave the payment
 * published with its message in the DLQ (tests/admin/test_admin_replay saw this).
 */
static void test_dead_mark_waits_for_replay(void)
{
    PGconn *api = PQconnectdb(tdb_url(db)), *worker = PQconnectdb(tdb_url(db));
    char pid[16], *status = NULL;
    const char *wait_params[1] = {pid};
    PGresult *res = NULL;
    bool waited = false;
    pay p;

    if (!CHECK(PQstatus(api) == CONNECTION_OK && PQstatus(worker) == CONNECTION_OK) ||
        !pay_new(&p, "replay-race", DEAD_LETTERED))
        goto out;
    {
        const char *replay[3] = {p.letter_id, "admin", p.event_id};
        const char *dead[4] = {p.payment_id, p.event_id, "1", "amount is zero"};

        res = PQexec(api, "BEGIN");
        PQclear(res);
        res = PQexecParams(api, PAYMENT_STATUS_SQL_REPLAYED, 3, NULL, replay, NULL, NULL, 0);
        if (!CHECK_STR(PQcmdTuples(res), "1"))
            goto out;
        PQclear(res);
        res = NULL;
        if (!CHECK(PQsendQueryParams(worker, PAYMENT_STATUS_SQL_DEAD_LETTERED, 4, NULL, dead, NULL,
                                     NULL, 0) == 1))
            goto out;
    }
    snprintf(pid, sizeof pid, "%d", PQbackendPID(worker));
    for (int i = 0; i < 500 && !waited; i++) { /* 5 s */
        char *n = value("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int "
                        "AND wait_event_type = 'Lock'",
                        1, wait_params);

        waited = n != NULL && strcmp(n, "1") == 0;
        free(n);
        if (!waited) {
            PQconsumeInput(worker);
            if (!PQisBusy(worker))
                break; /* it finished without waiting for the replay */
            tproc_sleep_ms(10);
        }
    }
    CHECK(waited);
    res = PQexec(api, "COMMIT");
    PQclear(res);
    res = PQgetResult(worker);
    CHECK_INT(PQresultStatus(res), PGRES_COMMAND_OK);
    CHECK_STR(PQcmdTuples(res), "1");
    PQclear(res);
    res = NULL;
    while ((res = PQgetResult(worker)) != NULL)
        PQclear(res);
    status = pay_status(&p);
    CHECK_STR(status, "dead_lettered");
out:
    PQclear(res);
    free(status);
    PQfinish(api);
    PQfinish(worker);
}

static void test_every_writer_asks_the_owner(void)
{
    static const struct {
        const char *name, *sql, *guard;
    } stmts[] = {
        {"published", PAYMENT_STATUS_SQL_PUBLISHED, "payment_may_move(p.status, 'published')"},
        {"unroutable", PAYMENT_STATUS_SQL_UNROUTABLE, "payment_may_move(p.status, 'unroutable')"},
        {"retrying", PAYMENT_STATUS_SQL_RETRYING, "payment_may_move(status, 'retrying')"},
        {"dead_lettered", PAYMENT_STATUS_SQL_DEAD_LETTERED,
         "payment_may_move(status, 'dead_lettered')"},
        {"replayed", PAYMENT_STATUS_SQL_REPLAYED, "payment_may_move(status, 'published', true)"},
    };
    PGresult *res;

    for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
        tcheck_context("statement %s", stmts[i].name);
        CHECK_CONTAINS(stmts[i].sql, stmts[i].guard);
    }
    tcheck_context_clear();
    /* every SQL function of the schema that UPDATEs payments (settle_payment, settle_batch) */
    res = run("functions",
              "SELECT proname, prosrc ~ 'payment_may_move\\(' FROM pg_proc "
              "WHERE prosrc ~* 'update\\s+payments\\M' ORDER BY proname",
              0, NULL);
    if (res != NULL) {
        CHECK(PQntuples(res) >= 2);
        for (int r = 0; r < PQntuples(res); r++) {
            tcheck_context("function %s", PQgetvalue(res, r, 0));
            CHECK_STR(PQgetvalue(res, r, 1), "t");
        }
    }
    PQclear(res);
    tcheck_context_clear();
}

static void run_all(void)
{
    conn = PQconnectdb(tdb_url(db));
    if (PQstatus(conn) != CONNECTION_OK) {
        FAIL("connect: %s", PQerrorMessage(conn));
    } else {
        TRUN(test_table);
        TRUN(test_writers);
        TRUN(test_late_writers);
        TRUN(test_dead_mark_waits_for_replay);
        TRUN(test_every_writer_asks_the_owner);
    }
    PQfinish(conn);
}

int main(void)
{
    return tdb_main("payment_status", true, &db, run_all);
}
