/* api/admin/reconcile.h - GET /admin/reconciliation: totals per status and the checks that must
 * hold */
#ifndef API_ADMIN_RECONCILE_H
#define API_ADMIN_RECONCILE_H

#include "api/api_metrics.h"
#include "shared/config.h"
#include "shared/http/http.h"
#include "shared/pg/db_pool.h"

/*
 * reconcile_report - counts and amount sums per status, then each check with
 * ok and up to 20 offending ids: every settled payment has exactly one
 * balanced ledger effect; ledger lines only for settled payments; the inbox
 * and the settled set agree (within the inbox retention); no payment is still
 * accepted after RELAY_SLO_SECONDS. Read in one REPEATABLE READ snapshot.
 */
void reconcile_report(const gw_config *cfg, db_pool *pool, api_metrics *m, http_request *r);

#endif
