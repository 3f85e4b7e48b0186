/* shared/program.h - the frame the relay and the worker share: start-up, health server, stop */
#ifndef SHARED_PROGRAM_H
#define SHARED_PROGRAM_H

#include <signal.h>
#include <stdbool.h>

#include "shared/config.h"
#include "shared/http/health.h"
#include "shared/lib/metrics.h"

typedef struct program {
    const char *name;
    metrics *registry; /* owned: the program's series, registered before program_serve() */
    health *health;    /* owned: /healthz, /readyz and /metrics; NULL without METRICS_LISTEN */
} program;

/*
 * program_begin - logs, failpoints and the AMQP heartbeat from @cfg, SIGTERM/SIGINT setting
 * *@stop, randomness for back-off jitter, a schema at this build's version
 * (waiting for it a while), and an empty metric registry. False: exit 1.
 */
bool program_begin(program *p, const char *name, const gw_config *cfg, volatile sig_atomic_t *stop);

/* program_serve - start the health server once every series is registered; false: exit 1. */
bool program_serve(program *p, const gw_config *cfg);

/* program_end - stop the health server, free the registry, log "stopped"; returns @rc. */
int program_end(program *p, int rc);

#endif
