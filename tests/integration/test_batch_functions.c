/*
 * tests/integration/test_batch_functions.c - the set-based accept_batch() and
 * settle_batch() against accept_payment() and settle_payment() row by row:
 * same outcomes, same answers, same rows.
 *
 * Two fresh databases get the same random batches, drawn from a few ids so that
 * every outcome happens often: replays, reused keys, decided payments, unknown
 * and dead-lettered payments, duplicates, and one event twice in a batch.
 * Database A runs the batch function; database B runs the row function for
 * each item in one transaction, which is what the batch replaced. A third
 * connection to each holds the advisory lock of one event now and then
 * ('in_flight'). Now and then both sides lose the idempotency records of a few
 * events, as the purge removes them after 7 days, and some payment rows their
 * fingerprint, as rows written before sql/0011 have none: those events are then
 * answered from the payment row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

#define BATCHES    400
#define MAX_ITEMS  12
#define EVENTS     10
#define PAYMENTS   7
#define GENERATION 25 /* batches per set of ids: fresh ids keep "accepted" coming */

/* ---- accept ---------------------------------------------------------------------------- */

typedef struct accept_item {
    char event_id[24], payment_id[24], fingerprint[3], body[64], response[64];
    const char *method, *decision, *currency;
} accept_item;

static PGconn *connect_to(const char *url)
{
    PGconn *c = PQconnectdb(url);

    if (PQstatus(c) != CONNECTION_OK) {
        FAIL("connect %s: %s", url, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

static bool exec_ok(PGconn *c, const char *sql)
{
    PGresult *res = PQexec(c, sql);
    bool ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;

    if (!ok)
        FAIL("%s: %s", sql, PQerrorMessage(c));
    PQclear(res);
    return ok;
}

/*
 * Both sides print one line per item from rows (idx, outcome, third column);
 * how the third column reads differs between accept and settle.
 */
typedef void row_printer(PGresult *res, int row, char *out, size_t cap, size_t *len);

static void print_rows(PGresult *res, row_printer *print, char *out, size_t cap, size_t *len)
{
    for (int r = 0; r < PQntuples(res); r++)
        print(res, r, out, cap, len);
}

/*
 * run_batch - @sql with the items @arr (stolen) as $1 in one transaction, the
 * way the programs call it: one line per item into @out, or "error".
 */
static void run_batch(PGconn *c, const char *sql, json_t *arr, int n, row_printer *print, char *out,
                      size_t cap)
{
    char *text = json_dumps(arr, JSON_COMPACT);
    const char *params[1] = {text};
    PGresult *res;
    size_t len = 0;

    json_decref(arr);
    out[0] = '\0';
    exec_ok(c, "BEGIN");
    res = PQexecParams(c, sql, 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(out, cap, "error");
        exec_ok(c, "ROLLBACK");
    } else {
        CHECK_INT(PQntuples(res), n);
        for (int r = 0; r < PQntuples(res); r++)
            CHECK_INT(atoi(PQgetvalue(res, r, 0)), r); /* rows come in item order */
        print_rows(res, print, out, cap, &len);
        exec_ok(c, "COMMIT");
    }
    PQclear(res);
    free(text);
}

/*
 * run_row - one item through the single-item function, inside the caller's
 * transaction; on an error the transaction is rolled back, @out says "error"
 * and false is returned.
 */
static bool run_row(PGconn *c, const char *sql, int nparams, const char *const *params,
                    row_printer *print, char *out, size_t cap, size_t *len)
{
    PGresult *res = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
    bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;

    if (ok) {
        print_rows(res, print, out, cap, len);
    } else {
        snprintf(out, cap, "error");
        exec_ok(c, "ROLLBACK");
    }
    PQclear(res);
    return ok;
}

/*
 * same_batch - both sides answered alike and wrote alike (@state_of describes
 * what a database holds); false when the answers differ.
 */
static bool same_batch(tdb *a, tdb *b, const char *got, const char *want, char *(*state_of)(tdb *))
{
    char *sa, *sb;

    if (!CHECK_STR(got, want))
        return false;
    sa = state_of(a);
    sb = state_of(b);
    CHECK_STR(sa, sb);
    free(sa);
    free(sb);
    return true;
}

/* Count the batches whose answer contains each of @marks ("error" is a whole answer). */
static void tally(const char *got, const char *const *marks, int n, int *seen)
{
    for (int i = 0; i < n; i++)
        seen[i] += strcmp(marks[i], "error") == 0 ? strcmp(got, "error") == 0
                                                  : strstr(got, marks[i]) != NULL;
}

/* The draw must have produced every outcome, or the comparison proved little. */
static void check_all_seen(const char *const *marks, int n, const int *seen)
{
    for (int i = 0; i < n; i++)
        if (!CHECK(seen[i] > 0))
            printf("# outcome %s never happened\n", marks[i]);
}

static int accept_by_payment_id(const void *a, const void *b)
{
    return strcmp(((const accept_item *)a)->payment_id, ((const accept_item *)b)->payment_id);
}

static void random_accept_item(accept_item *it, int gen, int e)
{
    static const char *const methods[] = {"pix", "ted", "card"};
    int variant = rand() % 4 == 0; /* a quarter reuse a key with new content */

    snprintf(it->event_id, sizeof it->event_id, "g%d-ev-%d", gen, e);
    /* mostly the event's own payment, sometimes one another event already decided */
    snprintf(it->payment_id, sizeof it->payment_id, "g%d-pay-%d", gen,
             rand() % 5 == 0 ? rand() % PAYMENTS : e % PAYMENTS);
    snprintf(it->fingerprint, sizeof it->fingerprint, "%s", variant ? "bb" : "aa");
    snprintf(it->body, sizeof it->body, "{\"event\":\"%.23s\",\"v\":%d}", it->event_id, variant);
    snprintf(it->response, sizeof it->response, "{\"event_id\":\"%.23s\",\"v\":%d}", it->event_id,
             variant);
    it->method = methods[e % 3];
    it->decision = e % 2 ? "refused" : "approved";
    it->currency = rand() % 97 == 0 ? "USD" : "BRL"; /* breaks a CHECK: the batch fails */
}

static json_t *item_json(const accept_item *it)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "event_id", it->event_id,
                     "payment_id", it->payment_id, "method", it->method, "decision", it->decision,
                     "amount_cents", (json_int_t)1234, "currency", it->currency, "payee_bank",
                     "001", "payee_account", "12345-6", "fingerprint", it->fingerprint, "body",
                     it->body, "response", it->response, "decided_at", "2026-11-30T12:00:00Z");
}

/* "outcome|response" */
static void print_accept_row(PGresult *res, int row, char *out, size_t cap, size_t *len)
{
    *len += (size_t)snprintf(out + *len, cap - *len, "%s|%s\n", PQgetvalue(res, row, 1),
                             PQgetvalue(res, row, 2));
}

static void accept_set_based(PGconn *c, const accept_item *items, int n, char *out, size_t cap)
{
    json_t *arr = json_array();

    for (int i = 0; i < n; i++)
        json_array_append_new(arr, item_json(&items[i]));
    run_batch(c, "SELECT idx, outcome, response_body FROM accept_batch($1::jsonb)", arr, n,
              print_accept_row, out, cap);
}

static void accept_row_by_row(PGconn *c, const accept_item *items, int n, char *out, size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    exec_ok(c, "BEGIN");
    for (int i = 0; i < n; i++) {
        const accept_item *it = &items[i];
        const char *params[] = {
            it->event_id, it->payment_id, it->method,  it->decision,           "1234",
            it->currency, "001",          "12345-6",   "2026-11-30T12:00:00Z", it->fingerprint,
            it->body,     NULL,           it->response};
        bool ok = run_row(
            c,
            "SELECT 0, outcome, response_body FROM accept_payment($1, $2, $3, $4, $5::bigint, "
            "$6, $7, $8, $9::timestamptz, decode($10, 'hex'), $11, $12, $13)",
            13, params, print_accept_row, out, cap, &len);

        if (!ok)
            return;
    }
    exec_ok(c, "COMMIT");
}

/*
 * expire_some - on both sides alike, for three events of generation @gen: the event
 * gets the idempotency record a build before sql/0018 wrote beside its payment, or
 * loses it again (the purge's DELETE); of every other one the payment row forgets its
 * fingerprint (a row from before sql/0011).
 */
static void expire_some(PGconn *ca, PGconn *cb, int gen)
{
    char sql[320];

    for (int i = 0; i < 3; i++) {
        int e = rand() % EVENTS;

        if (rand() % 2)
            snprintf(sql, sizeof sql,
                     "INSERT INTO idempotency_keys (event_id, fingerprint, payment_id, "
                     "response_status, response_body) SELECT event_id, fingerprint, payment_id, "
                     "202, payment_accepted_body(event_id, payment_id) FROM payments "
                     "WHERE event_id = 'g%d-ev-%d' AND fingerprint IS NOT NULL "
                     "ON CONFLICT DO NOTHING",
                     gen, e);
        else
            snprintf(sql, sizeof sql, "DELETE FROM idempotency_keys WHERE event_id = 'g%d-ev-%d'",
                     gen, e);
        exec_ok(ca, sql);
        exec_ok(cb, sql);
        if (i % 2 == 1) {
            snprintf(sql, sizeof sql,
                     "UPDATE payments SET fingerprint = NULL WHERE event_id = 'g%d-ev-%d'", gen, e);
            exec_ok(ca, sql);
            exec_ok(cb, sql);
        }
    }
}

/* Everything the accepts wrote, as one string (outbox ids differ; their order may not). */
static char *accept_state_of(tdb *db)
{
    return tdb_value(
        db,
        "SELECT concat_ws(' / ', "
        "(SELECT string_agg(payment_id || ':' || event_id || ':' || method || ':' || decision "
        "  || ':' || coalesce(encode(fingerprint, 'hex'), '-'), ',' ORDER BY payment_id) "
        "  FROM payments), "
        "(SELECT string_agg(event_id || ':' || payment_id || ':' || routing_key || ':' || body, "
        "',' "
        "  ORDER BY id) FROM outbox), "
        "(SELECT string_agg(event_id || ':' || encode(fingerprint, 'hex') || ':' || payment_id "
        "  || ':' || response_body, ',' ORDER BY event_id) FROM idempotency_keys))",
        NULL);
}

static void test_accept_same_as_row_by_row(void)
{
    tdb *a = tdb_create(true), *b = tdb_create(true);
    PGconn *ca = a ? connect_to(tdb_url(a)) : NULL, *cb = b ? connect_to(tdb_url(b)) : NULL;
    PGconn *la = a ? connect_to(tdb_url(a)) : NULL, *lb = b ? connect_to(tdb_url(b)) : NULL;
    /* a replay whose body was rebuilt from the payment row ends in "status":"accepted"} */
    static const char *const marks[] = {"accepted|",   "replay|",
                                        "key_reused|", "payment_decided|",
                                        "in_flight|",  "\"status\":\"accepted\"}",
                                        "error"};
    enum { NMARKS = sizeof marks / sizeof marks[0] };
    static char got[4096], want[4096];
    int seen[NMARKS] = {0};

    if (ca == NULL || cb == NULL || la == NULL || lb == NULL)
        goto out;
    srand(20261130);
    for (int batch = 0; batch < BATCHES; batch++) {
        accept_item items[MAX_ITEMS];
        int n = 1 + rand() % MAX_ITEMS;
        bool hold = rand() % 4 == 0;

        /* A quarter of the batches may hold one event twice (accept_batch() then goes row by
         * row); the others draw distinct events and take the set-based path. */
        bool twice = rand() % 4 == 0;
        int order[EVENTS];

        for (int i = 0; i < EVENTS; i++)
            order[i] = i;
        for (int i = EVENTS - 1; i > 0; i--) {
            int k = rand() % (i + 1), t = order[i];

            order[i] = order[k];
            order[k] = t;
        }
        if (!twice && n > EVENTS)
            n = EVENTS;
        if (rand() % 6 == 0)
            expire_some(ca, cb, batch / GENERATION);
        for (int i = 0; i < n; i++)
            random_accept_item(&items[i], batch / GENERATION, twice ? rand() % EVENTS : order[i]);
        qsort(items, (size_t)n, sizeof items[0], accept_by_payment_id); /* as the committer does */
        if (hold) { /* the other transaction on event 9 of this generation */
            char sql[128];

            snprintf(sql, sizeof sql, "SELECT pg_advisory_lock(hashtextextended('g%d-ev-9', 0))",
                     batch / GENERATION);
            exec_ok(la, sql);
            exec_ok(lb, sql);
        }
        accept_set_based(ca, items, n, got, sizeof got);
        accept_row_by_row(cb, items, n, want, sizeof want);
        if (hold) {
            exec_ok(la, "SELECT pg_advisory_unlock_all()");
            exec_ok(lb, "SELECT pg_advisory_unlock_all()");
        }
        tcheck_context("accept batch %d of %d items", batch, n);
        if (!same_batch(a, b, got, want, accept_state_of))
            break;
        tally(got, marks, NMARKS, seen);
    }
    tcheck_context_clear();
    check_all_seen(marks, NMARKS, seen);
out:
    PQfinish(ca);
    PQfinish(cb);
    PQfinish(la);
    PQfinish(lb);
    tdb_drop(a);
    tdb_drop(b);
}

/* ---- settle ---------------------------------------------------------------------------- */

#define SETTLE_PAYMENTS 60 /* per generation; events up to SETTLE_EVENTS-1 have no payment */
#define SETTLE_EVENTS   70

/* The payments of generation @gen, the same on both sides; every seventh dead-lettered. */
static bool seed_payments(PGconn *c, int gen)
{
    char sql[640];

    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM generate_series(0, %d) g, LATERAL accept_payment("
             "'g%d-sev-' || g, 'g%d-spay-' || g, (ARRAY['pix','ted','card'])[g %% 3 + 1], "
             "'approved', 100 + g, 'BRL', '001', '0000-' || g, now(), '\\xaa'::bytea, '{}', "
             "NULL, '{}')",
             SETTLE_PAYMENTS - 1, gen, gen);
    if (!exec_ok(c, sql))
        return false;
    snprintf(sql, sizeof sql,
             "UPDATE payments SET status = 'dead_lettered' WHERE payment_id LIKE 'g%d-spay-%%' "
             "AND split_part(payment_id, '-', 3)::int %% 7 = 0",
             gen);
    return exec_ok(c, sql);
}

typedef struct settle_item {
    char event_id[32], payment_id[32], attempt[12];
} settle_item;

static int settle_by_payment_id(const void *a, const void *b)
{
    return strcmp(((const settle_item *)a)->payment_id, ((const settle_item *)b)->payment_id);
}

static void random_settle_item(settle_item *it, int gen, int e)
{
    snprintf(it->event_id, sizeof it->event_id, "g%d-sev-%d", gen, e);
    /* now and then the payment of another event: no such pair, 'unknown_payment' */
    snprintf(it->payment_id, sizeof it->payment_id, "g%d-spay-%d", gen,
             rand() % 10 == 0 ? rand() % SETTLE_PAYMENTS : e);
    snprintf(it->attempt, sizeof it->attempt, "%s",
             rand() % 150 == 0 ? "99999999999"
             : rand() % 2      ? "1"
                               : "2"); /* out of range: error */
}

/* "outcome|1" when it has seconds (a settle), "outcome|0" otherwise */
static void print_settle_row(PGresult *res, int row, char *out, size_t cap, size_t *len)
{
    *len += (size_t)snprintf(out + *len, cap - *len, "%s|%d\n", PQgetvalue(res, row, 1),
                             !PQgetisnull(res, row, 2));
}

static void settle_set_based(PGconn *c, const settle_item *items, int n, char *out, size_t cap)
{
    json_t *arr = json_array();

    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s,s:s,s:o}", "event_id", items[i].event_id,
                                             "payment_id", items[i].payment_id, "attempt",
                                             json_integer(atoll(items[i].attempt))));
    run_batch(c, "SELECT idx, outcome, seconds FROM settle_batch($1::jsonb)", arr, n,
              print_settle_row, out, cap);
}

static void settle_row_by_row(PGconn *c, const settle_item *items, int n, char *out, size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    exec_ok(c, "BEGIN");
    for (int i = 0; i < n; i++) {
        const char *params[] = {items[i].event_id, items[i].payment_id, items[i].attempt};

        if (!run_row(c, "SELECT 0, outcome, seconds FROM settle_payment($1, $2, $3::integer)", 3,
                     params, print_settle_row, out, cap, &len))
            return;
    }
    exec_ok(c, "COMMIT");
}

static char *settle_state_of(tdb *db)
{
    return tdb_value(
        db,
        "SELECT concat_ws(' / ', "
        "(SELECT string_agg(event_id || ':' || payment_id || ':' || attempt, ',' "
        "  ORDER BY event_id) FROM inbox), "
        "(SELECT string_agg(event_id || ':' || payment_id || ':' || account || ':' || side || ':' "
        "  || amount_cents, ',' ORDER BY id) FROM ledger_entries), "
        "(SELECT string_agg(payment_id || ':' || status || ':' || attempts || ':' "
        "  || (settled_at IS NULL), ',' ORDER BY payment_id) FROM payments))",
        NULL);
}

static void test_settle_same_as_row_by_row(void)
{
    tdb *a = tdb_create(true), *b = tdb_create(true);
    PGconn *ca = a ? connect_to(tdb_url(a)) : NULL, *cb = b ? connect_to(tdb_url(b)) : NULL;
    static const char *const marks[] = {"settled|1", "duplicate|0", "terminal|0",
                                        "unknown_payment|0", "error"};
    enum { NMARKS = sizeof marks / sizeof marks[0] };
    static char got[4096], want[4096];
    int seen[NMARKS] = {0};

    if (ca == NULL || cb == NULL)
        goto out;
    srand(20261201);
    for (int batch = 0; batch < BATCHES; batch++) {
        settle_item items[MAX_ITEMS];
        int n = 1 + rand() % MAX_ITEMS, gen = batch / GENERATION;
        bool twice = rand() % 4 == 0; /* may hold one event twice: the row-by-row path */

        if (batch % GENERATION == 0 && !(seed_payments(ca, gen) && seed_payments(cb, gen)))
            break;
        for (int i = 0; i < n; i++)
            random_settle_item(&items[i], gen,
                               twice ? rand() % SETTLE_EVENTS
                                     : (batch % GENERATION * MAX_ITEMS + i) % SETTLE_EVENTS);
        qsort(items, (size_t)n, sizeof items[0], settle_by_payment_id); /* as the worker does */
        settle_set_based(ca, items, n, got, sizeof got);
        settle_row_by_row(cb, items, n, want, sizeof want);
        tcheck_context("settle batch %d of %d items", batch, n);
        if (!same_batch(a, b, got, want, settle_state_of))
            break;
        tally(got, marks, NMARKS, seen);
    }
    tcheck_context_clear();
    check_all_seen(marks, NMARKS, seen);
out:
    PQfinish(ca);
    PQfinish(cb);
    tdb_drop(a);
    tdb_drop(b);
}

/*
 * The relay's mark of a payment commits while settle_batch() waits for that payment's lock,
 * after the batch's snapshot was taken: the lock returns the mark's version, which the
 * snapshot cannot see. The settle must still land on it (sql/0023 finds the row by event_id
 * and lets READ COMMITTED's recheck follow it; by the ctid the lock saw, the update would
 * find nothing, and the inbox row and ledger lines would be written for a payment left
 * 'published').
 */
static void test_settle_behind_a_concurrent_mark(void)
{
    tdb *db = tdb_create(true);
    PGconn *relay = db ? connect_to(tdb_url(db)) : NULL,
           *worker = db ? connect_to(tdb_url(db)) : NULL;
    char pid[16];
    PGresult *res;
    bool waited = false;

    if (relay == NULL || worker == NULL)
        goto out;
    CHECK(tdb_exec(db,
                   "SELECT accept_payment('race-ev', 'race-pay', 'pix', 'approved', 100, 'BRL', "
                   "'001', '0000-1', now(), '\\xaa'::bytea, '{}', NULL, '{}')",
                   NULL));
    CHECK(exec_ok(relay, "BEGIN"));
    CHECK(exec_ok(relay, "UPDATE payments SET status = 'published', updated_at = now() "
                         "WHERE payment_id = 'race-pay'"));
    CHECK(PQsendQuery(worker, "SELECT idx, outcome, seconds FROM settle_batch('[{\"event_id\": "
                              "\"race-ev\", \"payment_id\": \"race-pay\", \"attempt\": 1}]')"));
    snprintf(pid, sizeof pid, "%d", PQbackendPID(worker));
    for (int i = 0; i < 500 && !waited; i++) { /* at most 5 s for the batch to reach the lock */
        waited = tdb_long(db,
                          "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int "
                          "AND wait_event_type = 'Lock'",
                          pid, NULL) == 1;
        if (!waited)
            nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    CHECK(waited);
    CHECK(exec_ok(relay, "COMMIT"));
    res = PQgetResult(worker);
    CHECK_INT(PQresultStatus(res), PGRES_TUPLES_OK);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        CHECK_STR(PQgetvalue(res, 0, 1), "settled");
    else
        FAIL("settle_batch: %s", PQerrorMessage(worker));
    PQclear(res);
    while ((res = PQgetResult(worker)) != NULL)
        PQclear(res);
    CHECK_SQL_STR(db,
                  "SELECT status || ' ' || attempts || ' ' || (settled_at IS NOT NULL) "
                  "FROM payments WHERE payment_id = 'race-pay'",
                  "settled 1 true");
    CHECK_SQL_STR(db, "SELECT count(*) FROM inbox WHERE event_id = 'race-ev'", "1");
    CHECK_SQL_STR(db, "SELECT count(*) FROM ledger_entries WHERE event_id = 'race-ev'", "2");
out:
    PQfinish(relay);
    PQfinish(worker);
    tdb_drop(db);
}

static void run(void)
{
    TRUN(test_accept_same_as_row_by_row);
    TRUN(test_settle_same_as_row_by_row);
    TRUN(test_settle_behind_a_concurrent_mark);
}

int main(void)
{
    return tdb_main("batch_functions", true, NULL, run); /* each test makes two databases */
}
