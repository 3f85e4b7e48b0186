/* tests/e2e/relay_restart.h - one relay survives a restart of the broker or the database */
#ifndef TESTS_E2E_RELAY_RESTART_H
#define TESTS_E2E_RELAY_RESTART_H

/*
 * relay_restart_main - the whole test for @what ("broker" or "db"): 2,000
 * pending rows, one relay slowed by relay.after_publish=sleep=500 (so the
 * restart lands mid-way); after 500 rows are published, "$GW_STACK stop
 * @what" then "start @what" (always, and by a guard process if the test
 * dies). Every row must end published within 90 s of the restart, the queue
 * hold every event at least once, and the relay be the same process, ready
 * again. Returns main()'s exit status.
 */
int relay_restart_main(const char *test_name, const char *what);

#endif
