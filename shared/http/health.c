/* shared/http/health.c - a tiny router on top of shared/http */
#include "shared/http/health.h"

#include <stdlib.h>
#include <string.h>

#include "shared/http/http.h"

struct health {
    http_server *server;
    const metrics *registry;
    atomic_bool db_up;
    atomic_bool mq_up;
    metric *db_ready, *mq_ready; /* owned by the registry: what /readyz says, as gauges */
};

static void health_handle(void *arg, http_request *r)
{
    health *h = arg;
    const char *path = http_request_path(r);

    if (strcmp(http_request_method(r), "GET") != 0 && strcmp(http_request_method(r), "HEAD") != 0) {
        static const char *const allow[] = {"Allow", "GET", NULL};
        http_reply(r, 405, "application/json", "{\"status\":405}", 14, allow);
    } else if (strcmp(path, "/healthz") == 0) {
        http_reply_json(r, 200, json_pack("{s:s}", "status", "ok"), NULL);
    } else if (strcmp(path, "/readyz") == 0) {
        bool db = atomic_load(&h->db_up), mq = atomic_load(&h->mq_up);
        http_reply_json(r, db && mq ? 200 : 503,
                        json_pack("{s:s,s:b,s:b}", "status", db && mq ? "ready" : "not_ready",
                                  "database", db, "broker", mq),
                        NULL);
    } else if (strcmp(path, "/metrics") == 0) {
        size_t len = 0;
        char *text = metrics_render(h->registry, &len);

        if (text == NULL) {
            http_reply(r, 500, "text/plain", "out of memory\n", 14, NULL);
            return;
        }
        http_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, NULL);
        free(text);
    } else {
        http_reply(r, 404, "application/json", "{\"status\":404}", 14, NULL);
    }
}

gw_err health_start(const listen_addr *listen, metrics *registry, health **out)
{
    http_options opt = {0};
    health *h;
    gw_err err;

    *out = NULL;
    if (!listen->set)
        return GW_OK;
    h = calloc(1, sizeof *h);
    if (h == NULL)
        return GW_ERR_NOMEM;
    h->registry = registry;
    atomic_init(&h->db_up, false);
    atomic_init(&h->mq_up, false);
    /* registered here, before the server thread renders the registry; both start at 0 */
    h->db_ready = metrics_gauge(registry, "paygw_database_ready", NULL,
                                "1 while the program's PostgreSQL connection is up (/readyz).");
    h->mq_ready = metrics_gauge(registry, "paygw_broker_ready", NULL,
                                "1 while the program's RabbitMQ connection is up (/readyz).");
    opt.listen = *listen;
    opt.threads = 1;
    opt.connection_limit = 64;
    opt.timeout_s = 10;
    opt.handler = health_handle;
    opt.app = h;
    err = http_server_start(&opt, &h->server);
    return GW_BUILT(err, h, health_stop, out);
}

void health_stop(health *h)
{
    if (h == NULL)
        return;
    http_server_stop(h->server, 1000);
    free(h);
}

void health_set_db(health *h, bool up)
{
    if (h == NULL)
        return;
    atomic_store(&h->db_up, up);
    metrics_set(h->db_ready, up ? 1 : 0);
}

void health_set_mq(health *h, bool up)
{
    if (h == NULL)
        return;
    atomic_store(&h->mq_up, up);
    metrics_set(h->mq_ready, up ? 1 : 0);
}
