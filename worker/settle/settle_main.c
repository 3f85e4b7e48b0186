/*
 * payments-worker - settle payment decisions into the ledger
 *
 * DESCRIPTION  Consumes payments.settlement with basic.qos(WORKER_PREFETCH) and
 *              manual acks. The deliveries in hand (up to half the prefetch,
 *              at most 256) are applied in one PostgreSQL transaction
 *              (settle_batch(), sql/0009: inbox rows + balanced ledger lines +
 *              payments settled), and acked only after that COMMIT; a duplicate
 *              is acked with no effect. Transient bank failures go to a TTL delay queue as a
 *              confirmed copy; permanent ones and exhausted retries are nacked
 *              without requeue, so the DLX writes x-death.
 * SECURITY     DB role paygw_worker (sql/0004): SELECT/INSERT/DELETE on inbox,
 *              SELECT/INSERT on ledger_entries, SELECT and a few UPDATE columns
 *              on payments; nothing on the outbox.
 * ENVIRONMENT  DATABASE_URL, AMQP_URL (required); WORKER_PREFETCH (32),
 *              RETRY_DELAYS_MS (1000,5000), QUEUE_TYPE (classic),
 *              BANK_SIM_RULES, INBOX_RETENTION_DAYS (30), METRICS_LISTEN (off),
 *              AMQP_CACERT (amqps only), LOG_LEVEL, LOG_FORMAT,
 *              GATEWAY_FAILPOINTS.
 * SIGNALS      SIGTERM/SIGINT: cancel the consumer, finish the batch in hand
 *              (COMMIT, then ack), close, exit 0.
 * EXIT STATUS  0 clean stop; 78 bad configuration; 1 anything else.
 */
#include <signal.h>
#include <stdio.h>

#include <curl/curl.h>

#include "shared/config.h"
#include "shared/lib/log.h"
#include "shared/program.h"
#include "worker/settle/bank_http.h"
#include "worker/settle/bank_sim.h"
#include "worker/settle/settle.h"

static volatile sig_atomic_t stop_requested;

int main(void)
{
    const gw_config *cfg = config_load_or_exit(CONFIG_NEED_DB | CONFIG_NEED_AMQP);
    bank sim = {0}, http = {0};
    program p;
    settle *s = NULL;
    char why[160];
    int rc = 1;

    if (bank_sim_new(cfg->bank_sim_rules, &sim, why, sizeof why) != GW_OK) {
        fprintf(stderr, "config: BANK_SIM_RULES is invalid: %s\n", why);
        return CONFIG_EX_CONFIG;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "payments-worker: curl_global_init failed\n");
        return 1;
    }
    /* BANK_URL: settle through the HTTP bank (contract section 12), else the simulation */
    if (program_begin(&p, "payments-worker", cfg, &stop_requested) &&
        (cfg->bank_url == NULL || bank_http_new(cfg, p.registry, &http) == GW_OK) &&
        settle_new(cfg, cfg->bank_url ? &http : &sim, p.registry, &s) == GW_OK &&
        program_serve(&p, cfg)) {
        settle_set_health(s, p.health); /* series registered first: served from now on */
        log_info("started", "prefetch=%d retry_steps=%d", cfg->worker_prefetch, cfg->retry_steps);
        settle_run(s, &stop_requested);
        log_info("stopping", "reason=signal");
        rc = 0;
    }
    settle_free(s);
    rc = program_end(&p, rc);
    bank_free(&http);
    bank_free(&sim);
    curl_global_cleanup();
    return rc;
}
