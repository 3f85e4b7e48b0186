/*
 * tests/integration/test_mark_plan.c - the relay's mark reaches payments by primary key, whatever
 * the statistics say
 *
 * The relay marks a batch with one statement (PAYMENT_STATUS_SQL_PUBLISHED): the outbox rows by
 * id, then their payments. Right after a burst of accepts, the statistics may still say that no
 * payment is `accepted` (the last ANALYZE saw them all published). An index that such a filter
 * can use alone (a partial index on `status = 'accepted'`, once proposed for reconciliation) then
 * looks like one row to the planner, which loops the batch's 1,024 rows over every accepted
 * payment: 20 million comparisons, 7.9 s, past the 5 s statement timeout, and the relay marks
 * nothing (docs/decisions.md 17). Here the statement is planned in exactly that state: each
 * payments access must be by payments_pkey.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shared/payment_status.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

static tdb *db;

/* 20,000 accepted payments of @prefix, each with its pending outbox row. */
static bool seed(tdb *t, const char *prefix)
{
    return tdb_exec(t,
                    "WITH s AS (SELECT g, $1 || '-e' || g AS e, $1 || '-p' || g AS p "
                    "FROM generate_series(1, 20000) g), "
                    "pay AS (INSERT INTO payments (payment_id, event_id, method, decision, "
                    "amount_cents, currency, payee_bank, payee_account) "
                    "SELECT p, e, 'pix', 'approved', 100 + g, 'BRL', '001', '1234-5' FROM s) "
                    "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                    "SELECT e, p, 'payment.pix.approved', '{}' FROM s",
                    prefix, NULL);
}

/* Every node of @plan that reads `payments`: by payments_pkey. Counts them in *@n. */
static void check_payments_access(json_t *plan, int *n)
{
    const char *rel = json_string_value(json_object_get(plan, "Relation Name"));
    json_t *children = json_object_get(plan, "Plans"), *child;
    size_t i;

    if (rel != NULL && strcmp(rel, "payments") == 0) {
        const char *type = json_string_value(json_object_get(plan, "Node Type"));
        const char *index = json_string_value(json_object_get(plan, "Index Name"));

        (*n)++;
        if (strcmp(type, "ModifyTable") != 0) {
            tcheck_context("a %s of payments", type);
            CHECK(index != NULL && strcmp(index, "payments_pkey") == 0);
            tcheck_context_clear();
        }
    }
    json_array_foreach(children, i, child) check_payments_access(child, n);
}

static void run(void)
{
    char *ids, *sql, *plan;
    json_t *root;
    int n = 0;

    /* a history of 40,000 published payments, and statistics that saw only those */
    CHECK(seed(db, "h1") && seed(db, "h2"));
    CHECK(tdb_exec(db, "UPDATE outbox SET state = 'published', published_at = now()", NULL));
    CHECK(tdb_exec(db, "UPDATE payments SET status = 'published'", NULL));
    CHECK(tdb_exec(db, "ANALYZE payments", NULL));
    CHECK(tdb_exec(db, "ANALYZE outbox", NULL));
    /* then a burst the statistics have not seen, and the relay's first batch of it */
    CHECK(seed(db, "new"));
    ids = tdb_value(db,
                    "SELECT array_agg(id)::text FROM (SELECT id FROM outbox WHERE state = "
                    "'pending' ORDER BY id LIMIT 1024) x",
                    NULL);
    if (!CHECK(ids != NULL))
        return;
    if (asprintf(&sql, "PREPARE mark(bigint[]) AS %s", PAYMENT_STATUS_SQL_PUBLISHED) < 0)
        abort();
    CHECK(tdb_exec(db, sql, NULL));
    free(sql);
    if (asprintf(&sql, "EXPLAIN (FORMAT JSON) EXECUTE mark('%s')", ids) < 0)
        abort();
    plan = tdb_value(db, sql, NULL);
    free(sql);
    root = plan != NULL ? json_loads(plan, 0, NULL) : NULL;
    if (CHECK(root != NULL)) {
        check_payments_access(json_object_get(json_array_get(root, 0), "Plan"), &n);
        CHECK_INT(n, 3); /* locked, then updated: two reads of payments and the update */
        if (tcheck_failures() > 0)
            printf("plan: %s\n", plan);
    }
    json_decref(root);
    free(plan);
    free(ids);
}

int main(void)
{
    return tdb_main("test_mark_plan", true, &db, run);
}
