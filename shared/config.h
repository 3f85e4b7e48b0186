/* shared/config.h - configuration from the environment, validated once at start-up */
#ifndef SHARED_CONFIG_H
#define SHARED_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shared/lib/log.h"

#define CONFIG_MAX_RETRY_STEPS    8
#define CONFIG_MAX_COMMIT_THREADS 8
#define CONFIG_EX_CONFIG          78 /* sysexits.h EX_CONFIG */

typedef enum queue_type { QUEUE_CLASSIC, QUEUE_QUORUM } queue_type;

/* SETTLEMENT_MAX_LENGTH when unset (docs/operations.md, "Configuration") */
#define CONFIG_SETTLEMENT_MAX_LENGTH 200000

/* A listen address "a.b.c.d:port"; port 0 lets the kernel choose. */
typedef struct listen_addr {
    bool set;
    char host[64];
    uint16_t port;
} listen_addr;

/* What a program requires; everything else is optional or defaulted. */
enum config_need {
    CONFIG_NEED_DB = 1u << 0,
    CONFIG_NEED_AMQP = 1u << 1,
    CONFIG_NEED_TOKENS = 1u << 2,
};

/* A small value type: read through a const pointer after config_load(). */
typedef struct gw_config {
    const char *database_url; /* borrowed from the environment */
    const char *amqp_url;
    const char *amqp_cacert; /* a readable file; NULL: the system's CA bundle */
    int amqp_heartbeat_s;    /* the heartbeat each connection asks for (the broker may lower it) */
    listen_addr api_listen;
    listen_addr metrics_listen; /* .set false: no metrics server */
    const char *api_token;
    const char *admin_token;
    int worker_prefetch;
    int retry_delays_ms[CONFIG_MAX_RETRY_STEPS];
    int retry_steps;
    queue_type queue_type;
    long outbox_max_backlog;
    long settlement_max_length; /* x-max-length of payments.settlement (reject-publish) */
    int delivery_limit;         /* x-delivery-limit of payments.settlement (quorum only) */
    int commit_threads; /* payments-api: accept_batch() transactions in flight at once */
    int outbox_retention_hours;
    int inbox_retention_days;
    int relay_slo_seconds;
    int replay_rate;          /* REPLAY_RATE: letters a replay job publishes a second */
    int admin_session_idle_s; /* ADMIN_SESSION_IDLE_SECONDS: a console session's idle life */
    int retry_lost_after_s; /* a payment retrying longer is published again (sql/0014) */
    const char *bank_sim_rules;
    const char *bank_url;   /* NULL: the built-in simulation; else the HTTP bank (section 12) */
    int bank_timeout_ms;    /* each request to the HTTP bank, connecting included */
    const char *bank_token; /* NULL: no Authorization header */
    log_level log_level;
    log_format log_format;
    const char *failpoints;
} gw_config;

/*
 * config_load - fill @out from the environment. Every bad variable is reported
 * on @errs as one line naming it (never its value when it is a secret).
 * Returns the number of bad variables: 0 means @out is complete.
 */
int config_load(unsigned need, gw_config *out, FILE *errs);

/* config_load_or_exit - config_load() into a static config, exit(78) when bad. */
const gw_config *config_load_or_exit(unsigned need);

/* config_parse_listen - "host:port" into @out; false when malformed. */
bool config_parse_listen(const char *s, listen_addr *out);

/* config_parse_delays - "1000,5000" into @out (1..CONFIG_MAX_RETRY_STEPS steps, 1..3600000 ms). */
bool config_parse_delays(const char *s, int *out, int *n);

/* config_db_target - "host:port/dbname" of a libpq URL for logs (no user, no password). */
void config_db_target(const char *url, char *buf, size_t len);

#endif
