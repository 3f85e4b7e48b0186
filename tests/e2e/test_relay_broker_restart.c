/*
 * tests/e2e/test_relay_broker_restart.c - the broker restarts under a publishing relay
 *
 * "$GW_STACK stop broker" then "start broker" while one relay drains 2,000
 * rows: the same relay process reconnects, re-declares the topology and
 * publishes every row; durable queues and persistent messages survive the
 * restart, so the queue holds every event at least once (a batch published
 * but not confirmed before the outage is published again). Stops the shared
 * broker: meson runs it alone.
 */
#include "tests/e2e/relay_restart.h"

int main(void)
{
    return relay_restart_main("test_relay_broker_restart", "broker");
}
