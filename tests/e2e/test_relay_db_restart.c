/*
 * tests/e2e/test_relay_db_restart.c - PostgreSQL restarts under a publishing relay
 *
 * "$GW_STACK stop db" then "start db" while one relay drains 2,000 rows: the
 * claiming transaction in flight dies (its rows stay pending, though their
 * messages may already be in the queue), the same relay process reconnects,
 * LISTENs again and publishes every row; the queue holds every event at least
 * once. Stops the shared database: meson runs it alone.
 */
#include "tests/e2e/relay_restart.h"

int main(void)
{
    return relay_restart_main("test_relay_db_restart", "db");
}
