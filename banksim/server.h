/* banksim/server.h - the simulator's HTTP API (contract section 12) on libmicrohttpd */
#ifndef BANKSIM_SERVER_H
#define BANKSIM_SERVER_H

#include "banksim/rules.h"
#include "banksim/store.h"
#include "shared/config.h"
#include "shared/lib/err.h"

typedef struct server server;

typedef struct server_options {
    listen_addr listen;
    const char *token; /* borrowed; NULL: /v1 is open */
    store *store;      /* borrowed, outlives the server */
    rules *rules;      /* borrowed, outlives the server */
} server_options;

/*
 * server_start - listen and serve on a pool of event-loop threads. A request
 * that waits (a new transfer for the store's group commit, a late=MS answer)
 * is suspended meanwhile, so it holds up nobody else. Logs "listening" with
 * the bound port. On GW_OK *@out is owned by the caller (server_stop()).
 */
GW_MUSTCHECK gw_err server_start(const server_options *opt, server **out);

/* server_stop - answer the suspended requests, stop listening, close the connections, join
 * the threads, free @s. Accepts NULL. */
void server_stop(server *s);

#endif
