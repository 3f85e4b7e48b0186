/* worker/relay/wakeup.c - the API's NOTIFYs on a connection of their own */
#include "worker/relay/wakeup.h"

#include <stdlib.h>

#include "shared/outbox.h"

struct relay_wakeup {
    db_conn *db;
};

gw_err relay_wakeup_open(const char *url, const db_stmt *stmts, size_t n, relay_wakeup **out)
{
    relay_wakeup *w = calloc(1, sizeof *w);
    gw_err err;

    if (w == NULL)
        return GW_ERR_NOMEM;
    if ((err = db_open(url, "payments-relay-wakeup", stmts, n, false, &w->db)) != GW_OK ||
        (err = db_exec(w->db, "LISTEN " OUTBOX_NOTIFY_CHANNEL)) != GW_OK) {
        relay_wakeup_close(w);
        return err;
    }
    *out = w;
    return GW_OK;
}

void relay_wakeup_close(relay_wakeup *w)
{
    if (w == NULL)
        return;
    db_close(w->db);
    free(w);
}

db_conn *relay_wakeup_db(relay_wakeup *w)
{
    return w->db;
}

int relay_wakeup_fd(relay_wakeup *w)
{
    return PQsocket(db_pg(w->db));
}

gw_err relay_wakeup_take(relay_wakeup *w, bool *woken)
{
    PGconn *pg = db_pg(w->db);
    PGnotify *n;

    *woken = false;
    if (!PQconsumeInput(pg) || PQstatus(pg) != CONNECTION_OK)
        return GW_ERR_DB;
    while ((n = PQnotifies(pg)) != NULL) {
        PQfreemem(n);
        *woken = true;
    }
    return GW_OK;
}
