/*
 * tests/integration/test_relay_wakeups.c - at most one relay wake-up per committed batch
 *
 * The API wakes the relay with a NOTIFY after COMMIT, coalesced (docs/decisions.md, 4):
 * api/committer.c tells api/outbox_watch.c once per batch that committed a new payment.
 * When each answered job told it instead, a wake-up sent between two answers of one
 * batch made a second one for rows the relay had already been woken for (1.35 NOTIFYs
 * per commit at 1,500 payments/s, docs/performance.md). Many clients at once, then the
 * API's own counters: paygw_api_relay_wakeups_total can never pass
 * paygw_api_commit_batch_size_count, and is not zero.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/support/tapi.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/thttp.h"

#define CLIENTS    16
#define PER_CLIENT 60

static tdb *db;
static tapi api;

typedef struct client {
    int n;
    int accepted; /* 202s */
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    char event[48];

    for (int i = 0; i < PER_CLIENT; i++) {
        char *body;
        thttp_resp r;

        snprintf(event, sizeof event, "evt-wake-%d-%d", c->n, i);
        body = tapi_payment(event, event);
        if (thttp_post_payment(api.url, TAPI_TOKEN, body, NULL, &r) && r.status == 202)
            c->accepted++;
        thttp_resp_free(&r);
        free(body);
    }
    return NULL;
}

static void test_one_wakeup_per_batch(void)
{
    pthread_t t[CLIENTS];
    client c[CLIENTS] = {0};
    int accepted = 0, started = 0;
    double wakeups, batches;
    thttp_resp r;

    for (int i = 0; i < CLIENTS; i++) {
        c[i].n = i;
        if (pthread_create(&t[i], NULL, client_main, &c[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        accepted += c[i].accepted;
    }
    CHECK_INT(accepted, CLIENTS * PER_CLIENT);
    tproc_sleep_ms(50); /* the last wake-up is sent at most 2 ms after the last COMMIT */
    if (!CHECK(thttp_get(api.url, "/metrics", NULL, &r)))
        return;
    wakeups = tapi_metric(r.body, "paygw_api_relay_wakeups_total");
    batches = tapi_metric(r.body, "paygw_api_commit_batch_size_count");
    thttp_resp_free(&r);
    fprintf(stderr, "%d accepts in %.0f batches, %.0f wake-ups\n", accepted, batches, wakeups);
    CHECK(batches >= 1 && batches <= accepted);
    CHECK(wakeups >= 1);
    if (!CHECK(wakeups <= batches))
        fprintf(stderr, "more wake-ups than committed batches: %.0f > %.0f\n", wakeups, batches);
}

static void run(void)
{
    TRUN(test_one_wakeup_per_batch);
}

int main(void)
{
    return tapi_main("test_relay_wakeups", &db, &api, "relay-wakeups", run);
}
