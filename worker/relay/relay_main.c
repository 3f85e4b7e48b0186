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
#include <stdio.h>
#include <string.h>

#include "shared/config.h"
#include "shared/failpoint.h"
#include "shared/http/health.h"
#include "shared/lib/backoff.h"
#include "shared/lib/log.h"
#include "shared/lib/metrics.h"
#include "shared/lib/sig.h"
#include "shared/pg/db.h"
#include "worker/relay/relay.h"

#define STARTUP_WAIT_S 30

static volatile sig_atomic_t stop_requested;

int main(void)
{
    const gw_config *cfg = config_load_or_exit(CONFIG_NEED_DB | CONFIG_NEED_AMQP);
    metrics *registry = NULL;
    health *h = NULL;
    relay *r = NULL;
    int rc = 1;

    log_init("payments-relay", cfg->log_level, cfg->log_format);
    failpoint_init(cfg->failpoints);
    if (!sig_install_stop(&stop_requested) || !backoff_seed())
        return 1;
    if (db_wait_schema(cfg->database_url, "payments-relay", STARTUP_WAIT_S) != GW_OK)
        return 1;
    registry = metrics_new();
    if (registry == NULL || relay_new(cfg, registry, NULL, &r) != GW_OK)
        goto cleanup;
    if (health_start(&cfg->metrics_listen, registry, &h) != GW_OK)
        goto cleanup;
    relay_set_health(r, h); /* series registered first: the server renders them from now on */
    log_info("started", "batch=%d confirm_timeout_ms=%d", RELAY_BATCH_SIZE,
             RELAY_CONFIRM_TIMEOUT_MS);
    relay_run(r, &stop_requested);
    log_info("stopping", "reason=signal");
    rc = 0;
cleanup:
    relay_free(r);
    health_stop(h);
    metrics_free(registry);
    log_info("stopped", "status=%d", rc);
    return rc;
}
