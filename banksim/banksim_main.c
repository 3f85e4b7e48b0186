/*
 * payments-banksim - a simulated bank (PSP) over HTTP, for tests and demos only
 *
 * DESCRIPTION  Executes transfers at most once per Idempotency-Key and answers
 *              a repeated key with the stored result (contract section 12). The
 *              business rules of contract section 5 come from BANK_SIM_RULES;
 *              faults (lost answers, slow answers, 500s) from BANK_SIM_FAULTS.
 *              Not a production component: see docs/payments-banksim.md.
 * SECURITY     Listens on loopback only. Bearer BANK_TOKEN on /v1 when set,
 *              compared in constant time; never logged.
 * ENVIRONMENT  BANKSIM_LISTEN (127.0.0.1:28090, a 127.0.0.0/8 address),
 *              BANKSIM_STORE (a JSON-lines file; unset: memory only),
 *              BANK_TOKEN (unset: no auth), BANK_SIM_RULES, BANK_SIM_FAULTS,
 *              LOG_LEVEL (info), LOG_FORMAT (text).
 * SIGNALS      SIGTERM/SIGINT: stop accepting, finish answers in flight, exit 0.
 * EXIT STATUS  0 clean stop; 78 bad configuration; 1 anything else.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "banksim/rules.h"
#include "banksim/server.h"
#include "banksim/store.h"
#include "shared/config.h"
#include "shared/lib/log.h"
#include "shared/lib/token.h"

#define DEFAULT_LISTEN "127.0.0.1:28090"

typedef struct banksim_config {
    listen_addr listen;
    const char *store_path; /* borrowed from the environment; NULL: memory only */
    const char *token;      /* NULL: no auth */
    rules *rules;           /* owned */
    log_level log_level;
    log_format log_format;
} banksim_config;

/* A variable's value, NULL when unset or empty. */
static const char *env(const char *name)
{
    const char *s = getenv(name);

    return s != NULL && *s != '\0' ? s : NULL;
}

/* Every bad variable is one line on stderr; returns how many there were. */
static int config_read(banksim_config *c)
{
    const char *s = env("BANKSIM_LISTEN");
    char why[256];
    int bad = 0;

    if (!config_parse_listen(s ? s : DEFAULT_LISTEN, &c->listen) ||
        strncmp(c->listen.host, "127.", 4) != 0) {
        fprintf(stderr, "config: BANKSIM_LISTEN=\"%s\" is not a loopback IPv4 address:port\n", s);
        bad++;
    }
    c->store_path = env("BANKSIM_STORE");
    c->token = env("BANK_TOKEN");
    if (rules_new(env("BANK_SIM_RULES"), env("BANK_SIM_FAULTS"), &c->rules, why, sizeof why) !=
        GW_OK) {
        fprintf(stderr, "config: %s\n", why); /* why starts with the variable's name */
        bad++;
    }
    c->log_level = LOG_INFO;
    if ((s = env("LOG_LEVEL")) != NULL && !log_parse_level(s, &c->log_level)) {
        fprintf(stderr, "config: LOG_LEVEL=\"%s\" is not debug, info, warn or error\n", s);
        bad++;
    }
    c->log_format = LOG_FORMAT_TEXT;
    if ((s = env("LOG_FORMAT")) != NULL && !log_parse_format(s, &c->log_format)) {
        fprintf(stderr, "config: LOG_FORMAT=\"%s\" is neither text nor json\n", s);
        bad++;
    }
    return bad;
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
    banksim_config cfg = {0};
    server_options opt = {0};
    server *srv = NULL;
    store *st = NULL;
    sigset_t stop_set;
    int sig = 0, rc = 1;

    if (config_read(&cfg) != 0) {
        rules_free(cfg.rules);
        return CONFIG_EX_CONFIG;
    }
    log_init("payments-banksim", cfg.log_level, cfg.log_format);
    if (!token_init()) {
        log_error("crypto_init_failed", "library=libsodium");
        goto cleanup;
    }
    /* signals are read by sigwait() below: block them before any thread starts */
    if (!block_signals(&stop_set))
        goto cleanup;
    if (store_open(cfg.store_path, &st) != GW_OK)
        goto cleanup;

    opt.listen = cfg.listen;
    opt.token = cfg.token;
    opt.store = st;
    opt.rules = cfg.rules;
    if (server_start(&opt, &srv) != GW_OK)
        goto cleanup;

    sigwait(&stop_set, &sig);
    log_info("stopping", "signal=%d", sig);
    rc = 0;
cleanup:
    server_stop(srv); /* before the store and the rules it borrows */
    store_close(st);
    rules_free(cfg.rules);
    log_info("stopped", "status=%d", rc);
    return rc;
}
