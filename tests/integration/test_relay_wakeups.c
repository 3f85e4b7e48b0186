/*
 * tests/integration/test_relay_wakeups.c - one relay wake-up per committed batch, delivered
 *
 * The API wakes the relay with pg_notify('paygw_outbox') after each accept batch's COMMIT,
 * in the same round trip (docs/decisions.md, 4). Many clients at once, a session of the
 * test's own LISTENing on the channel, then the API's counters: every batch committed its
 * wake-up (paygw_api_relay_wakeups_total equals paygw_api_commit_batch_size_count; with the
 * watcher thread that sent them before, 71-84 for 91-102 batches), and the listener received
 * each of them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <libpq-fe.h>

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
    int accepted = 0, started = 0, heard = 0;
    double wakeups, batches;
    PGconn *listener = PQconnectdb(tdb_url(db));
    PGnotify *note;
    PGresult *res;
    thttp_resp r;

    res = PQexec(listener, "LISTEN paygw_outbox");
    if (!CHECK(PQresultStatus(res) == PGRES_COMMAND_OK)) {
        PQclear(res);
        PQfinish(listener);
        return;
    }
    PQclear(res);

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
    tproc_sleep_ms(200); /* the last notification on its way to the listener */
    PQconsumeInput(listener);
    while ((note = PQnotifies(listener)) != NULL) {
        heard++;
        PQfreemem(note);
    }
    PQfinish(listener);
    if (!CHECK(thttp_get(api.url, "/metrics", NULL, &r)))
        return;
    wakeups = tapi_metric(r.body, "paygw_api_relay_wakeups_total");
    batches = tapi_metric(r.body, "paygw_api_commit_batch_size_count");
    thttp_resp_free(&r);
    fprintf(stderr, "%d accepts in %.0f batches, %.0f wake-ups, %d heard\n", accepted, batches,
            wakeups, heard);
    CHECK(batches >= 1 && batches <= accepted);
    if (!CHECK(wakeups == batches))
        fprintf(stderr, "wake-ups are not one per batch: %.0f for %.0f\n", wakeups, batches);
    CHECK_INT(heard, (long long)wakeups);
}

static void run(void)
{
    TRUN(test_one_wakeup_per_batch);
}

int main(void)
{
    return tapi_main("test_relay_wakeups", &db, &api, "relay-wakeups", run);
}
