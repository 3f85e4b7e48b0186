/*
 * payments-api - accept payment decisions over HTTP
 *
 * DESCRIPTION  POST /v1/payments validates a decision and commits the payment,
 *              its outbox row and its idempotency record in one PostgreSQL
 *              transaction; the 202 is sent only after that COMMIT. The same
 *              event again gets the same answer and writes nothing.
 * SECURITY     Bearer API_TOKEN on /v1, ADMIN_TOKEN on /admin, compared in
 *              constant time. Never logs tokens or request bodies.
 * ENVIRONMENT  DATABASE_URL, AMQP_URL, API_TOKEN, ADMIN_TOKEN (required);
 *              API_LISTEN (127.0.0.1:8080), OUTBOX_MAX_BACKLOG (100000),
 *              INBOX_RETENTION_DAYS (30, the replay window), RELAY_SLO_SECONDS
 *              (60, reconciliation), RETRY_DELAYS_MS and QUEUE_TYPE (the
 *              topology the admin declares), AMQP_CACERT (amqps only),
 *              COMMIT_THREADS (2: the second starts a batch when the first's
 *              COMMIT is slow or many wait), LOG_LEVEL (info), LOG_FORMAT
 *              (text), GATEWAY_FAILPOINTS; REPLAY_RATE (200 letters/s of a
 *              replay job) and ADMIN_SESSION_IDLE_SECONDS (900) for the console.
 * SIGNALS      SIGTERM/SIGINT: stop accepting, finish requests in flight, exit 0.
 * EXIT STATUS  0 clean stop; 78 bad configuration; 1 anything else.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "api/api_metrics.h"
#include "api/committer.h"
#include "api/outbox_watch.h"
#include "api/routes.h"
#include "shared/amqp/mq.h"
#include "shared/config.h"
#include "shared/failpoint.h"
#include "shared/http/http.h"
#include "shared/lib/log.h"
#include "shared/lib/token.h"
#include "shared/pg/db.h"
#include "shared/pg/db_pool.h"

/*
 * libmicrohttpd's event threads: one per core, 2 to 8. Each wakes for the events of its own
 * connections; with more threads than cores they mostly wake each other (8 on 2 cores cost
 * 165 us of API CPU per payment at 1,500/s, 2 cost 140; docs/decisions.md, 29).
 */
#define HTTP_THREADS_MIN 2
#define HTTP_THREADS_MAX 8
#define DB_POOL_SIZE     4 /* reads and admin; accepts go through the committer */
#define COMMIT_MAX_BATCH 128
#define CONNECTION_LIMIT 4000 /* a pollfd each per loop of its thread, not a thread each */
#define PER_IP_LIMIT     1000 /* so one client's slow connections cannot take every slot */
#define IDLE_TIMEOUT_S   30
#define STOP_GRACE_MS    8000
#define STARTUP_WAIT_S   30

static int http_threads(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    return cores < HTTP_THREADS_MIN   ? HTTP_THREADS_MIN
           : cores > HTTP_THREADS_MAX ? HTTP_THREADS_MAX
                                      : (int)cores;
}

/* The soft limit on open files, raised towards @want (up to the hard limit). */
static void raise_fd_limit(rlim_t want)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        log_warn("fd_limit", "want=%lu", (unsigned long)want);
}

/* SIGTERM and SIGINT blocked (into @stop_set, for sigwait()), SIGPIPE ignored. */
static bool block_signals(sigset_t *stop_set)
{
    int rc;

    sigemptyset(stop_set);
    sigaddset(stop_set, SIGTERM);
    sigaddset(stop_set, SIGINT);
    if ((rc = pthread_sigmask(SIG_BLOCK, stop_set, NULL)) != 0) {
        log_error("sig_install_failed", "signal=SIGTERM error=\"%s\"", strerror(rc));
        return false;
    }
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        log_error("sig_install_failed", "signal=SIGPIPE error=\"%s\"", strerror(errno));
        return false;
    }
    return true;
}

int main(void)
{
    const gw_config *cfg =
        config_load_or_exit(CONFIG_NEED_DB | CONFIG_NEED_AMQP | CONFIG_NEED_TOKENS);
    http_options opt = {0};
    api_metrics am = {0};
    api_app app = {0};
    http_server *server = NULL;
    sigset_t stop_set;
    int sig = 0, rc = 1;

    log_init("payments-api", cfg->log_level, cfg->log_format);
    failpoint_init(cfg->failpoints);
    mq_set_heartbeat(cfg->amqp_heartbeat_s); /* the admin DLQ's connections */
    if (!token_init()) {
        log_error("crypto_init_failed", "library=libsodium");
        return 1;
    }
    /* before any thread: reconciliation asks the HTTP bank with libcurl (api/admin/bank_list.c) */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        log_error("curl_init_failed", "library=libcurl");
        return 1;
    }
    /* signals are read by sigwait() below: block them before any thread starts */
    if (!block_signals(&stop_set))
        return 1;

    if (db_wait_schema(cfg->database_url, "payments-api", STARTUP_WAIT_S) != GW_OK)
        return 1;
    raise_fd_limit(CONNECTION_LIMIT + 256); /* connections + database, broker, files */
    api_metrics_init(&am);
    app.cfg = cfg;
    app.payments.metrics = &am;
    if (db_pool_new(cfg->database_url, DB_POOL_SIZE, payments_stmts, payments_nstmts,
                    &app.payments.pool) != GW_OK)
        goto cleanup;
    if (outbox_watch_start(cfg->database_url, cfg->outbox_max_backlog, &am, &app.payments.watch) !=
        GW_OK)
        goto cleanup;
    if (committer_start(cfg->database_url, cfg->commit_threads, COMMIT_MAX_BATCH,
                        am.commit_batch_size, am.notify_sent, &app.payments.committer) != GW_OK)
        goto cleanup;

    if (dlq_new(cfg, app.payments.pool, &am, &app.dlq) != GW_OK)
        goto cleanup;
    if (sessions_new(cfg->admin_session_idle_s, &app.sessions) != GW_OK)
        goto cleanup;
    if (replay_jobs_start(cfg, app.dlq, app.payments.pool, &am, &app.jobs) != GW_OK)
        goto cleanup;
    if (reconciler_start(cfg, &am, &app.reconciler) != GW_OK)
        goto cleanup;

    opt.listen = cfg->api_listen;
    opt.threads = http_threads();
    opt.connection_limit = CONNECTION_LIMIT;
    opt.per_ip_limit = PER_IP_LIMIT;
    opt.timeout_s = IDLE_TIMEOUT_S;
    opt.early = routes_early;
    opt.handler = routes_handle;
    opt.app = &app;
    if (http_server_start(&opt, &server) != GW_OK)
        goto cleanup;

    sigwait(&stop_set, &sig);
    log_info("stopping", "signal=%d", sig);
    reconciler_stop(app.reconciler); /* its waiting requests answered 503 while the server runs */
    app.reconciler = NULL;
    http_server_stop(server, STOP_GRACE_MS); /* requests in flight finish and are answered */
    server = NULL;
    rc = 0;
cleanup:
    reconciler_stop(app.reconciler);
    http_server_stop(server, 0);
    replay_jobs_stop(app.jobs); /* before the dlq it replays through */
    dlq_free(app.dlq);
    sessions_free(app.sessions);
    committer_stop(app.payments.committer); /* after the server: every job was answered */
    outbox_watch_stop(app.payments.watch);
    db_pool_free(app.payments.pool);
    api_metrics_deinit(&am);
    log_info("stopped", "status=%d", rc);
    return rc;
}
