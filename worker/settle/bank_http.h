/* worker/settle/bank_http.h - the bank over HTTP (contract section 12; docs/payments-worker.md) */
#ifndef WORKER_SETTLE_BANK_HTTP_H
#define WORKER_SETTLE_BANK_HTTP_H

#include "shared/config.h"
#include "shared/lib/err.h"
#include "shared/lib/metrics.h"
#include "worker/settle/bank.h"

/*
 * bank_http_new - a bank at @cfg->bank_url: each batch's transfers are POSTed
 * concurrently (libcurl's multi interface, kept-alive connections), keyed by
 * event_id, by a thread of its own, so two batches can be in flight (bank.h);
 * an answer that is lost or says nothing is looked up with GET
 * /v1/transfers/{id}. Its series go to @registry. curl_global_init() must
 * have run. Owned by the caller (bank_free(), which ends the thread).
 */
GW_MUSTCHECK gw_err bank_http_new(const gw_config *cfg, metrics *registry, bank *out);

/*
 * bank_http_classify - what an answer means (the table of contract section
 * 12): @curl_code a CURLcode, @status the HTTP status (0: none), @body the
 * answer's text (may be NULL). BANK_OK fills @reference; anything else @why.
 * Pure: for the unit tests.
 */
bank_result bank_http_classify(int curl_code, long status, const char *body,
                               const char *transfer_id, char *reference, size_t ref_len, char *why,
                               size_t why_len);

#endif
