/*
 * tests/e2e/test_inbox_proof.c - the contract's core claim, step by step, without a worker
 *
 * A persistent message with a stable message_id is published under confirms.
 * Connection A takes it (basic.get, no ack) and applies it the way
 * worker/settle/inbox.c does (settle_payment() in one transaction, COMMIT), then
 * closes without acking: the ack is "lost". Connection B gets the same
 * message again, flagged redelivered, with the same body and message_id;
 * applying it again is a 'duplicate' with no second ledger effect; B acks.
 * In the end: one inbox row, two balanced ledger lines, an empty queue.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/te2e.h"
#include "tests/e2e/tmq.h"
#include "tests/support/tcheck.h"

#define EVENT   "evt-proof-1"
#define PAYMENT "pay-proof-1"
#define AMOUNT  "4321"

static te2e e;

/*
 * Apply one delivery as worker/settle/inbox.c does: BEGIN; settle_payment(); COMMIT
 * when 'settled', ROLLBACK otherwise. Returns the outcome (new string).
 */
static char *apply(const char *attempt)
{
    char *outcome;

    if (!CHECK(tdb_exec(e.db, "BEGIN", NULL)))
        return NULL;
    outcome = tdb_value(e.db, "SELECT outcome FROM settle_payment($1, $2, $3::int)", EVENT, PAYMENT,
                        attempt, NULL);
    CHECK(tdb_exec(e.db, outcome != NULL && strcmp(outcome, "settled") == 0 ? "COMMIT" : "ROLLBACK",
                   NULL));
    return outcome;
}

static void check_one_effect(const char *when)
{
    tcheck_context("%s", when);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox WHERE event_id = $1", EVENT, NULL), 1);
    CHECK_INT(
        tdb_long(e.db, "SELECT count(*) FROM ledger_entries WHERE event_id = $1", EVENT, NULL), 2);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM ledger_entries WHERE event_id = $1 "
                       "AND side = 'debit' AND account = 'clearing:pix' AND amount_cents = " AMOUNT,
                       EVENT, NULL),
              1);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM ledger_entries WHERE event_id = $1 "
                       "AND side = 'credit' AND account = 'payee:001/1234-5' "
                       "AND amount_cents = " AMOUNT,
                       EVENT, NULL),
              1);
    CHECK_INT(tdb_long(e.db,
                       "SELECT count(*) FROM payments WHERE payment_id = $1 AND status = 'settled' "
                       "AND attempts = 1 AND settled_at IS NOT NULL",
                       PAYMENT, NULL),
              1);
    tcheck_context_clear();
}

static void run(void)
{
    char *body = te2e_payment_json(EVENT, PAYMENT, atoll(AMOUNT), "001", "1234-5");
    tmq *pub = NULL, *a = NULL, *b = NULL, *c = NULL;
    tmq_msg first = {0}, again = {0}, none = {0};
    char *outcome;

    if (!CHECK(tmq_declare_topology(e.amqp_url, NULL)) ||
        !CHECK(te2e_insert_payment(e.db, EVENT, PAYMENT, atoll(AMOUNT), "001", "1234-5")))
        goto out;

    /* publish: persistent, stable message_id, confirmed and routed */
    pub = tmq_connect(e.amqp_url);
    if (!CHECK(pub != NULL) || !CHECK(te2e_publish_event(pub, EVENT, body)))
        goto out;
    tmq_close(pub);
    pub = NULL;

    /* A: take it without ack, apply it, and "crash" before the ack */
    a = tmq_connect(e.amqp_url);
    if (!CHECK(a != NULL) || !CHECK_INT(tmq_get(a, "payments.settlement", false, &first), 1))
        goto out;
    CHECK(!first.redelivered);
    CHECK_STR(first.message_id, EVENT);
    CHECK_INT(first.delivery_mode, 2);
    CHECK_INT(tmq_header_int(&first, "x-attempt"), 1);
    outcome = apply("1");
    CHECK_STR(outcome, "settled");
    free(outcome);
    check_one_effect("after the first apply");
    tmq_close(a); /* no ack: the broker must deliver it again */
    a = NULL;

    /* B: the same message again, flagged redelivered */
    b = tmq_connect(e.amqp_url);
    if (!CHECK(b != NULL) || !CHECK_INT(tmq_get(b, "payments.settlement", false, &again), 1))
        goto out;
    CHECK(again.redelivered);
    CHECK_STR(again.message_id, first.message_id);
    CHECK_INT(again.len, first.len);
    CHECK_STR(again.body, first.body);
    CHECK_INT(tmq_header_int(&again, "x-attempt"), 1);
    outcome = apply("1");
    CHECK_STR(outcome, "duplicate");
    free(outcome);
    check_one_effect("after the redelivery");
    CHECK(tmq_ack(b, again.delivery_tag));
    CHECK_INT(tmq_get(b, "payments.settlement", false, &none), 0);
    tmq_close(b);
    b = NULL;

    /* acked for good: nothing left anywhere */
    c = tmq_connect(e.amqp_url);
    if (CHECK(c != NULL)) {
        CHECK_INT(tmq_depth(c, "payments.settlement"), 0);
        CHECK_INT(tmq_depth(c, "payments.settlement.dlq"), 0);
    }
    check_one_effect("at the end");
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM inbox", NULL), 1);
    CHECK_INT(tdb_long(e.db, "SELECT count(*) FROM ledger_entries", NULL), 2);
out:
    tmq_msg_free(&first);
    tmq_msg_free(&again);
    tmq_msg_free(&none);
    tmq_close(pub);
    tmq_close(a);
    tmq_close(b);
    tmq_close(c);
    free(body);
}

int main(void)
{
    return te2e_main("inbox_proof", &e, run);
}
