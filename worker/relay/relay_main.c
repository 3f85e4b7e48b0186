/*
 * payments-relay - publish committed outbox rows to RabbitMQ
 *
 * DESCRIPTION  Wakes on NOTIFY paygw_outbox (and polls every second anyway),
 *              claims pending rows with FOR UPDATE SKIP LOCKED, publishes them
 *              persistent and mandatory under publisher confirms, and marks
 *              each row in the claiming transaction: published when acked,
 *              unroutable when the broker returned it, pending again when
 *              nacked or unconfirmed. A row is never marked without a confirm.
 * SECURITY     DB role: SELECT/UPDATE/DELETE on outbox, UPDATE on payments.
 * ENVIRONMENT  DATABASE_URL, AMQP_URL (required); METRICS_LISTEN (off),
 *              QUEUE_TYPE (classic), RETRY_DELAYS_MS (1000,5000),
 *              OUTBOX_RETENTION_HOURS (24), LOG_LEVEL, LOG_FORMAT,
 *              GATEWAY_FAILPOINTS.
 * SIGNALS      SIGTERM/SIGINT: finish the batch in flight, then exit 0.
 * EXIT STATUS  0 clean stop; 78 bad configuration; 1 anything else.
 */
#include <signal.h>

#include "shared/config.h"
#include "shared/lib/log.h"
#include "shared/program.h"
#include "worker/relay/confirm_clock.h"
#include "worker/relay/relay.h"

static volatile sig_atomic_t stop_requested;

int main(void)
{
    const gw_config *cfg = config_load_or_exit(CONFIG_NEED_DB | CONFIG_NEED_AMQP);
    program p;
    relay *r = NULL;
    int rc = 1;

    if (!program_begin(&p, "payments-relay", cfg, &stop_requested))
        return program_end(&p, 1);
    if (relay_new(cfg, p.registry, NULL, &r) == GW_OK && program_serve(&p, cfg)) {
        relay_set_health(r, p.health); /* series registered first: served from now on */
        log_info("started", "batch=%d confirm_quiet_ms=%d", RELAY_BATCH_SIZE,
                 RELAY_CONFIRM_QUIET_MS);
        relay_run(r, &stop_requested);
        log_info("stopping", "reason=signal");
        rc = 0;
    }
    relay_free(r);
    return program_end(&p, rc);
}
