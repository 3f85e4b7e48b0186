/* api/admin/reconcile.h - the reconciliation report: totals per status and the checks that must
 * hold */
#ifndef API_ADMIN_RECONCILE_H
#define API_ADMIN_RECONCILE_H

#include <stdbool.h>

#include <jansson.h>

#include "shared/config.h"
#include "shared/lib/err.h"
#include "shared/pg/db.h"

/*
 * reconcile_run - counts and amount sums per status, then each check with ok
 * and up to 20 offending ids: every settled payment has exactly one balanced
 * ledger effect; ledger lines only for settled payments; the inbox and the
 * settled set agree (within the inbox retention); no payment is still accepted
 * after RELAY_SLO_SECONDS; with BANK_URL, the bank's books agree. Read in one
 * REPEATABLE READ snapshot on @db.
 *
 * The three ledger checks read the events written since the checkpoint of the
 * last clean report (sql/0020), or every event when @full; a report where all
 * three hold moves the checkpoint to its horizon, less five minutes that the
 * next report reads again. *@out: {"by_status", "checks", "ok"}, owned by the
 * caller. GW_ERR_DB when the database did not answer.
 */
GW_MUSTCHECK gw_err reconcile_run(db_conn *db, const gw_config *cfg, bool full, json_t **out);

#endif
