/* api/key_expiry.c - idempotency records live 7 days (expires_at); removed in small batches */
#include "api/key_expiry.h"

#include <stdlib.h>

#include "shared/lib/log.h"

const db_stmt key_expiry_stmt = {
    "expire_keys", "DELETE FROM idempotency_keys WHERE event_id IN (SELECT event_id FROM "
                   "idempotency_keys WHERE expires_at < now() LIMIT 1000)"};

static void expire_keys(db_conn *db)
{
    PGresult *res = db_prepared(db, key_expiry_stmt.name, 0, NULL);

    if (db_check(res, PGRES_COMMAND_OK, "expire_keys") == GW_OK && atol(PQcmdTuples(res)) > 0)
        log_info("idempotency_keys_expired", "rows=%s", PQcmdTuples(res));
    PQclear(res);
}

void key_expiry_tick(key_expiry *k, db_conn *db)
{
    if (++k->ticks % KEY_EXPIRY_TICKS == 0)
        expire_keys(db);
}
