/*
 * tests/integration/test_concurrent_same_event.c - 32 clients at once: one
 * effect, whatever the interleaving (the outcome table of openapi/payments.yaml)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"

#define CLIENTS 32

static tdb *db;
static tapi api;
static pthread_barrier_t start_line;

typedef struct client {
    char *body; /* owned */
    thttp_resp r;
} client;

static void *client_main(void *arg)
{
    client *c = arg;

    pthread_barrier_wait(&start_line); /* everyone sends at once */
    tapi_post(&api, c->body, NULL, &c->r);
    return NULL;
}

/* Run CLIENTS posts, client i sending bodies[i], all released together. */
static void run_all(client *clients)
{
    pthread_t t[CLIENTS];

    pthread_barrier_init(&start_line, NULL, CLIENTS);
    for (int i = 0; i < CLIENTS; i++)
        pthread_create(&t[i], NULL, client_main, &clients[i]);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start_line);
}

static bool type_is(const thttp_resp *r, const char *slug)
{
    const char *type = thttp_json_str(r, "type");
    size_t tl = type ? strlen(type) : 0, sl = strlen(slug);

    return tl > sl && strcmp(type + tl - sl, slug) == 0 && type[tl - sl - 1] == '/';
}

/* unexpected - print client @i's answer @r, which no case expected; 1 (one more "other"). */
static int unexpected(int i, const thttp_resp *r)
{
    fprintf(stderr, "client %d: status %ld body %s (curl: %s)\n", i, r->status, r->body, r->error);
    return 1;
}

static void test_same_event(void)
{
    client clients[CLIENTS];
    int first = 0, replays = 0, in_flight = 0, other = 0;

    for (int i = 0; i < CLIENTS; i++) {
        memset(&clients[i], 0, sizeof clients[i]);
        clients[i].body = tapi_payment("evt-race", "pay-race");
    }
    run_all(clients);
    for (int i = 0; i < CLIENTS; i++) {
        const thttp_resp *r = &clients[i].r;
        const char *replayed = thttp_header(r, "Idempotent-Replayed");

        if (r->status == 202 && replayed == NULL) {
            first++;
        } else if (r->status == 202 && strcmp(replayed, "true") == 0) {
            replays++;
        } else if (r->status == 409 && type_is(r, "request-in-flight")) {
            in_flight++;
        } else {
            other += unexpected(i, r);
        }
        if (r->status == 202) {
            CHECK_STR(thttp_json_str(r, "event_id"), "evt-race");
            CHECK_STR(thttp_header(r, "Location"), "/v1/payments/pay-race");
        }
    }
    printf("same event: %d first, %d replays, %d in flight, %d other\n", first, replays, in_flight,
           other);
    CHECK_INT(first, 1);
    CHECK_INT(other, 0);
    CHECK_INT(first + replays + in_flight, CLIENTS);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM payments WHERE payment_id = 'pay-race'", NULL), 1);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox WHERE event_id = 'evt-race'", NULL), 1);
    /* the payment row is the record (sql/0018) */
    CHECK_INT(
        tdb_long(db, "SELECT count(*) FROM idempotency_keys WHERE event_id = 'evt-race'", NULL), 0);
    for (int i = 0; i < CLIENTS; i++) {
        free(clients[i].body);
        thttp_resp_free(&clients[i].r);
    }
}

static void test_same_payment_many_events(void)
{
    client clients[CLIENTS];
    int accepted = 0, decided = 0, other = 0, winner = -1;
    char event[32], *winner_event = NULL;

    for (int i = 0; i < CLIENTS; i++) {
        memset(&clients[i], 0, sizeof clients[i]);
        snprintf(event, sizeof event, "evt-many-%02d", i);
        clients[i].body = tapi_payment(event, "pay-many");
    }
    run_all(clients);
    for (int i = 0; i < CLIENTS; i++) {
        const thttp_resp *r = &clients[i].r;

        if (r->status == 202 && thttp_header(r, "Idempotent-Replayed") == NULL) {
            accepted++;
            winner = i;
        } else if (r->status == 409 && type_is(r, "payment-already-decided")) {
            decided++;
        } else {
            other += unexpected(i, r);
        }
    }
    printf("same payment: %d accepted, %d already decided, %d other\n", accepted, decided, other);
    CHECK_INT(accepted, 1);
    CHECK_INT(decided, CLIENTS - 1);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM payments WHERE payment_id = 'pay-many'", NULL), 1);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox WHERE payment_id = 'pay-many'", NULL), 1);
    CHECK_INT(
        tdb_long(db, "SELECT count(*) FROM idempotency_keys WHERE payment_id = 'pay-many'", NULL),
        0);
    if (winner >= 0) {
        snprintf(event, sizeof event, "evt-many-%02d", winner);
        winner_event =
            tdb_value(db, "SELECT event_id FROM payments WHERE payment_id = 'pay-many'", NULL);
        CHECK_STR(winner_event, event); /* the row is the one the 202 spoke of */
        free(winner_event);
    }
    for (int i = 0; i < CLIENTS; i++) {
        free(clients[i].body);
        thttp_resp_free(&clients[i].r);
    }
}

/* 32 different payments at once (the API may commit them together): each its own answer and row. */
static void test_distinct_events(void)
{
    client clients[CLIENTS];
    char event[32];
    int ok = 0;

    for (int i = 0; i < CLIENTS; i++) {
        json_t *o;
        char *text;

        memset(&clients[i], 0, sizeof clients[i]);
        snprintf(event, sizeof event, "evt-d-%02d", i);
        text = tapi_payment(event, event);
        o = json_loads(text, 0, NULL);
        json_object_set_new(o, "amount_cents", json_integer(1000 + i)); /* tell them apart */
        clients[i].body = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        free(text);
    }
    run_all(clients);
    for (int i = 0; i < CLIENTS; i++) {
        const thttp_resp *r = &clients[i].r;
        char amount[16];

        snprintf(event, sizeof event, "evt-d-%02d", i);
        tcheck_context("client %d", i);
        if (CHECK_INT(r->status, 202)) {
            ok++;
            CHECK(thttp_header(r, "Idempotent-Replayed") == NULL);
            CHECK_STR(thttp_json_str(r, "event_id"), event); /* its own answer, not a neighbour's */
            CHECK_STR(thttp_json_str(r, "payment_id"), event);
        }
        snprintf(amount, sizeof amount, "%d", 1000 + i);
        CHECK_INT(tdb_long(db,
                           "SELECT count(*) FROM payments WHERE event_id = $1 AND "
                           "amount_cents = $2::bigint",
                           event, amount, NULL),
                  1);
        CHECK_INT(tdb_long(db,
                           "SELECT count(*) FROM outbox WHERE event_id = $1 AND "
                           "(body::jsonb->>'amount_cents')::bigint = $2::bigint",
                           event, amount, NULL),
                  1);
        tcheck_context_clear();
    }
    printf("distinct events: %d of %d accepted\n", ok, CLIENTS);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM payments WHERE event_id LIKE 'evt-d-%'", NULL),
              CLIENTS);
    for (int i = 0; i < CLIENTS; i++) {
        free(clients[i].body);
        thttp_resp_free(&clients[i].r);
    }
}

static void tests(void)
{
    TRUN(test_same_event);
    TRUN(test_same_payment_many_events);
    TRUN(test_distinct_events);
}

int main(void)
{
    return tapi_main("test_concurrent_same_event", &db, &api, "concurrent-api", tests);
}
