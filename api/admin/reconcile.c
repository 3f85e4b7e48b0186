/* api/admin/reconcile.c - conservation checks: every 202 became one effect or a visible failure */
#include "api/admin/reconcile.h"

#include <stdio.h>
#include <stdlib.h>

#include "api/admin/bank_list.h"
#include "api/problem.h"
#include "shared/lib/log.h"

#define OFFENDERS_MAX 20

typedef struct check {
    const char *name;
    const char *detail;
    const char *sql;                                                /* the offending ids */
    enum { PARAM_NONE, PARAM_INBOX_DAYS, PARAM_SLO_SECONDS } param; /* what $1 is */
} check;

static const check checks[] = {
    {"settled_payments_have_one_balanced_effect",
     "every settled payment has exactly one debit and one credit of its amount",
     "SELECT p.payment_id FROM payments p LEFT JOIN ("
     "  SELECT event_id, count(*) AS n,"
     "         sum(amount_cents) FILTER (WHERE side = 'debit') AS debit,"
     "         sum(amount_cents) FILTER (WHERE side = 'credit') AS credit"
     "  FROM ledger_entries GROUP BY event_id) l ON l.event_id = p.event_id "
     "WHERE p.status = 'settled' AND (l.n IS DISTINCT FROM 2 OR l.debit IS DISTINCT FROM "
     "p.amount_cents OR l.credit IS DISTINCT FROM p.amount_cents) "
     "ORDER BY 1 LIMIT 21",
     PARAM_NONE},
    {"ledger_only_for_settled", "no ledger line belongs to a payment that is not settled",
     "SELECT DISTINCT l.payment_id FROM ledger_entries l LEFT JOIN payments p "
     "ON p.event_id = l.event_id WHERE p.status IS DISTINCT FROM 'settled' ORDER BY 1 LIMIT 21",
     PARAM_NONE},
    {"inbox_matches_settled",
     "the inbox holds exactly the settled events (those settled within the inbox retention)",
     "(SELECT i.event_id FROM inbox i LEFT JOIN payments p ON p.event_id = i.event_id "
     " AND p.status = 'settled' WHERE p.event_id IS NULL) UNION ALL "
     "(SELECT p.event_id FROM payments p LEFT JOIN inbox i ON i.event_id = p.event_id "
     " WHERE p.status = 'settled' AND i.event_id IS NULL "
     " AND p.settled_at > now() - make_interval(days => $1::int)) LIMIT 21",
     PARAM_INBOX_DAYS},
    {"no_stale_accepted", "no payment stays accepted (unpublished) longer than RELAY_SLO_SECONDS",
     "SELECT payment_id FROM payments WHERE status = 'accepted' "
     "AND created_at < now() - make_interval(secs => $1::int) ORDER BY created_at LIMIT 21",
     PARAM_SLO_SECONDS},
};

/*
 * bank_agrees (contract section 12): $1 is the bank's executed transfers. A payment settled
 * through the bank whose reference the bank does not list as executed; a transfer of one of
 * our event_ids whose payment is not settled (past RELAY_SLO_SECONDS, $2: a call in flight is
 * executed a moment before its COMMIT) or carries another reference.
 */
#define BANK_AGREES_SQL                                                                            \
    "WITH bank AS (SELECT t->>'transfer_id' AS id, t->>'bank_reference' AS ref "                   \
    "              FROM jsonb_array_elements($1::jsonb) t) "                                       \
    "(SELECT p.payment_id FROM payments p LEFT JOIN bank b ON b.id = p.event_id "                  \
    "  AND b.ref = p.bank_reference WHERE p.status = 'settled' "                                   \
    "  AND p.bank_reference IS NOT NULL AND b.id IS NULL) "                                        \
    "UNION ALL "                                                                                   \
    "(SELECT p.payment_id FROM bank b JOIN payments p ON p.event_id = b.id "                       \
    "  WHERE (p.status <> 'settled' AND p.updated_at < now() - make_interval(secs => $2::int)) "   \
    "     OR (p.status = 'settled' AND p.bank_reference IS DISTINCT FROM b.ref)) "                 \
    "LIMIT 21"
#define BANK_LIST_MAX 5000000L

static gw_err bank_check(db_conn *db, const gw_config *cfg, json_t *list, bool *all_ok)
{
    const char *detail = "every payment settled through the bank has a reference the bank lists "
                         "as executed, and every transfer the bank executed for one of our "
                         "event_ids belongs to a settled payment with that reference";
    json_t *bank = NULL, *offending = json_array();
    char slo[16], *text = NULL;
    PGresult *res = NULL;
    int n = 0;
    gw_err err;

    if (bank_list_executed(cfg, BANK_LIST_MAX, &bank) != GW_OK) {
        detail = "the bank did not list its executed transfers: nothing could be compared";
        n = -1;
    } else {
        const char *params[2] = {text = json_dumps(bank, JSON_COMPACT), slo};

        snprintf(slo, sizeof slo, "%d", cfg->relay_slo_seconds);
        res = PQexecParams(db_pg(db), BANK_AGREES_SQL, 2, NULL, params, NULL, NULL, 0);
        if ((err = db_check(res, PGRES_TUPLES_OK, "bank_agrees")) != GW_OK) {
            PQclear(res);
            free(text);
            json_decref(bank);
            json_decref(offending);
            return err;
        }
        n = PQntuples(res);
        for (int i = 0; i < n && i < OFFENDERS_MAX; i++)
            json_array_append_new(offending, json_string(PQgetvalue(res, i, 0)));
    }
    json_array_append_new(list, json_pack("{s:s,s:b,s:o,s:b,s:s}", "name", "bank_agrees", "ok",
                                          n == 0, "offending", offending, "truncated",
                                          n > OFFENDERS_MAX, "detail", detail));
    if (n != 0) {
        *all_ok = false;
        log_warn("reconciliation_failed", "check=bank_agrees offending=%d", n);
    }
    PQclear(res);
    free(text);
    json_decref(bank);
    return GW_OK;
}

static json_t *totals(PGresult *res)
{
    json_t *by_status = json_object();

    for (int i = 0; i < PQntuples(res); i++)
        json_object_set_new(
            by_status, PQgetvalue(res, i, 0),
            json_pack("{s:I,s:I}", "count", (json_int_t)strtoll(PQgetvalue(res, i, 1), NULL, 10),
                      "amount_cents", (json_int_t)strtoll(PQgetvalue(res, i, 2), NULL, 10)));
    return by_status;
}

static gw_err run_checks(db_conn *db, const gw_config *cfg, json_t *list, bool *all_ok)
{
    for (size_t c = 0; c < sizeof checks / sizeof checks[0]; c++) {
        char value[16];
        const char *params[1] = {value};
        PGresult *res;

        snprintf(value, sizeof value, "%d",
                 checks[c].param == PARAM_INBOX_DAYS ? cfg->inbox_retention_days
                                                     : cfg->relay_slo_seconds);
        res = PQexecParams(db_pg(db), checks[c].sql, checks[c].param == PARAM_NONE ? 0 : 1, NULL,
                           params, NULL, NULL, 0);
        json_t *offending;
        int n;

        if (db_check(res, PGRES_TUPLES_OK, checks[c].name) != GW_OK) {
            PQclear(res);
            return GW_ERR_DB;
        }
        n = PQntuples(res);
        offending = json_array();
        for (int i = 0; i < n && i < OFFENDERS_MAX; i++)
            json_array_append_new(offending, json_string(PQgetvalue(res, i, 0)));
        json_array_append_new(list, json_pack("{s:s,s:b,s:o,s:b,s:s}", "name", checks[c].name, "ok",
                                              n == 0, "offending", offending, "truncated",
                                              n > OFFENDERS_MAX, "detail", checks[c].detail));
        if (n > 0) {
            *all_ok = false;
            log_warn("reconciliation_failed", "check=%s offending=%d", checks[c].name, n);
        }
        PQclear(res);
    }
    return GW_OK;
}

void reconcile_report(const gw_config *cfg, db_pool *pool, api_metrics *m, http_request *r)
{
    static const char *const retry[] = {"Retry-After", "1", NULL};
    json_t *list = NULL, *by_status = NULL;
    PGresult *res = NULL;
    db_conn *db = NULL;
    bool all_ok = true;

    if (db_pool_acquire(pool, 2000, &db) != GW_OK)
        goto unavailable;
    /* one snapshot: the checks must not see a payment between two of its writes */
    if (db_begin(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") != GW_OK)
        goto unavailable;
    res = PQexec(db_pg(db), "SELECT status, count(*), coalesce(sum(amount_cents), 0) "
                            "FROM payments GROUP BY status ORDER BY status");
    if (db_check(res, PGRES_TUPLES_OK, "reconciliation_totals") != GW_OK)
        goto rollback;
    by_status = totals(res);
    list = json_array();
    if (run_checks(db, cfg, list, &all_ok) != GW_OK ||
        (cfg->bank_url != NULL && bank_check(db, cfg, list, &all_ok) != GW_OK))
        goto rollback;
    db_rollback(db); /* read only: nothing to commit */
    db_pool_release(pool, db);
    PQclear(res);
    http_reply_json(
        r, 200, json_pack("{s:o,s:o,s:b}", "by_status", by_status, "checks", list, "ok", all_ok),
        NULL);
    return;
rollback:
    db_rollback(db);
unavailable:
    if (db != NULL)
        db_pool_release(pool, db);
    PQclear(res);
    json_decref(list);
    json_decref(by_status);
    problem_reply(r, m, 503, "service-unavailable", "Service Unavailable",
                  "the database is unavailable", NULL, retry);
}
