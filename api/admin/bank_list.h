/* api/admin/bank_list.h - the HTTP bank's list of executed transfers, for reconciliation */
#ifndef API_ADMIN_BANK_LIST_H
#define API_ADMIN_BANK_LIST_H

#include <jansson.h>

#include "shared/config.h"
#include "shared/lib/err.h"

/*
 * bank_list_executed - every transfer the bank at @cfg->bank_url lists as
 * executed (GET /v1/transfers?status=executed, page after page, contract
 * section 12) as a JSON array of {"transfer_id", "bank_reference"} in *@out
 * (owned by the caller). GW_ERR_RETRY when the bank does not answer a page
 * properly (logged); at most @max_items are read (GW_ERR_INVALID beyond).
 */
GW_MUSTCHECK gw_err bank_list_executed(const gw_config *cfg, long max_items, json_t **out);

#endif
