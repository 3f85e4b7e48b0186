/* api/reconcile.h - GET /admin/reconciliation: totals per status and the checks that must hold */
#ifndef API_RECONCILE_H
#define API_RECONCILE_H

#include "api/api_metrics.h"
#include "api/db_pool.h"
#include "shared/config.h"
#include "shared/http.h"

/*
 * reconcile_report - counts and amount sums per status, then each check with
 * ok and up to 20 offending ids: every settled payment has exactly one
 * balanced ledger effect; ledger lines only for settled payments; the inbox
 * and the settled set agree (within the inbox retention); no payment is still
 * accepted after RELAY_SLO_SECONDS. Read in one REPEATABLE READ snapshot.
 */
void reconcile_report(const gw_config *cfg, db_pool *pool, api_metrics *m, http_request *r);

#endif
