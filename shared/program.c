/* shared/program.c - the frame the relay and the worker share: start-up, health server, stop */
#include "shared/program.h"

#include "shared/amqp/mq.h"
#include "shared/failpoint.h"
#include "shared/lib/backoff.h"
#include "shared/lib/log.h"
#include "shared/lib/sig.h"
#include "shared/pg/db.h"

#define STARTUP_WAIT_S 30 /* the stack may start the programs before the migrations end */

bool program_begin(program *p, const char *name, const gw_config *cfg, volatile sig_atomic_t *stop)
{
    p->name = name;
    p->registry = NULL;
    p->health = NULL;
    log_init(name, cfg->log_level, cfg->log_format);
    failpoint_init(cfg->failpoints);
    mq_set_heartbeat(cfg->amqp_heartbeat_s);
    if (!sig_install_stop(stop) || !backoff_seed())
        return false;
    if (db_wait_schema(cfg->database_url, name, STARTUP_WAIT_S) != GW_OK)
        return false;
    p->registry = metrics_new();
    return p->registry != NULL;
}

bool program_serve(program *p, const gw_config *cfg)
{
    return health_start(&cfg->metrics_listen, p->registry, &p->health) == GW_OK;
}

int program_end(program *p, int rc)
{
    health_stop(p->health);
    metrics_free(p->registry);
    log_info("stopped", "status=%d", rc);
    return rc;
}
