/*
 * tests/admin/test_admin_idle_broker.c - the admin's broker connection after a long idle
 *
 * Nobody reads payments-api's admin connection between admin calls, so nobody answers the
 * broker's heartbeats and the broker closes it. The first drain after that used to answer
 * 503 "RabbitMQ is unavailable" on a healthy broker (api/admin/dlq_broker.c). Now: a drain,
 * 35 s of nothing, and the overview's queue depths and the drain work at once.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"

#define IDLE_MS 35000 /* past the broker's two missed heartbeats (AMQP_HEARTBEAT_S is 10) */

static te2e t;
static tapi api;
static tprog relay, worker;

static void drain_after_idle(void)
{
    thttp_resp r;

    tadm_drain(&api, 10, &r); /* opens the connection */
    thttp_resp_free(&r);
    tproc_sleep_ms(IDLE_MS);
    tadm_admin(&api, "GET", "/admin/overview", &r);
    CHECK_INT(r.status, 200);
    CHECK(json_is_array(json_object_get(r.json, "queues")));
    thttp_resp_free(&r);
    tadm_drain(&api, 10, &r); /* CHECKs 200 */
    thttp_resp_free(&r);
}

static void tests(void)
{
    TRUN(drain_after_idle);
}

int main(void)
{
    return tadm_main("admin_idle_broker", &t, &relay, &worker, &api, NULL, tests);
}
