/* api/admin/reconcile.c - conservation checks: every 202 became one effect or a visible failure */
#include "api/admin/reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/admin/bank_list.h"
#include "shared/lib/log.h"

#define OFFENDERS_MAX 20
/*
 * A clean report moves the checkpoint to its horizon less this: the next report reads these
 * minutes again, so a row deleted or edited by hand just after a clean report is still seen.
 */
#define RECHECK_SECONDS "300"
/* the report runs on a thread and a connection of its own (api/admin/reconciler.c), and a full
 * read of millions of rows outlasts DB_STATEMENT_TIMEOUT */
#define REPORT_TIMEOUT "SET LOCAL statement_timeout = '10min'"

enum { CHECK_BALANCED, CHECK_LEDGER_SETTLED, CHECK_INBOX, CHECK_STALE, CHECKS };

static const struct {
    const char *name, *detail;
} checks[CHECKS] = {
    [CHECK_BALANCED] = {"settled_payments_have_one_balanced_effect",
                        "every settled payment has exactly one debit and one credit of its amount"},
    [CHECK_LEDGER_SETTLED] = {"ledger_only_for_settled",
                              "no ledger line belongs to a payment that is not settled"},
    [CHECK_INBOX] = {"inbox_matches_settled", "the inbox holds exactly the settled events (those "
                                              "settled within the inbox retention)"},
    [CHECK_STALE] = {"no_stale_accepted",
                     "no payment stays accepted (unpublished) longer than RELAY_SLO_SECONDS"},
};

/* Counts and sums per status, and how many payments are accepted past the SLO ($1): one scan. */
#define TOTALS_SQL                                                                                 \
    "SELECT status, count(*), coalesce(sum(amount_cents), 0), count(*) FILTER (WHERE status = "    \
    "'accepted' AND created_at < now() - make_interval(secs => $1::int)) "                         \
    "FROM payments GROUP BY status ORDER BY status"

#define STALE_SQL                                                                                  \
    "SELECT payment_id FROM payments WHERE status = 'accepted' "                                   \
    "AND created_at < now() - make_interval(secs => $1::int) ORDER BY created_at LIMIT 21"

/*
 * The three ledger checks, on the events written since $1 (sql/0020): a payment updated, a
 * ledger line created or an inbox row processed since then; each such event judged whole, its
 * payment, all its ledger lines and its inbox row. Rows (check, id), at most 21 per check.
 * Every lookup is a LATERAL subquery so that each stays an index probe per event: the planner
 * cannot turn one into a hash join over a whole table on stale statistics (a report on the
 * last minutes then read 2,333,454 payments and 2,330,050 inbox rows into hash tables).
 * $2: INBOX_RETENTION_DAYS, past which a settled event's inbox row is purged.
 */
#define WINDOW_SQL                                                                                 \
    "WITH touched AS MATERIALIZED ("                                                               \
    "    SELECT event_id FROM payments WHERE updated_at >= $1::timestamptz"                        \
    "    UNION SELECT event_id FROM ledger_entries WHERE created_at >= $1::timestamptz"            \
    "    UNION SELECT event_id FROM inbox WHERE processed_at >= $1::timestamptz), "                \
    "e AS MATERIALIZED ("                                                                          \
    "    SELECT t.event_id, p.payment_id, p.status, p.amount_cents, p.settled_at, l.n,"            \
    "           l.debit, l.credit, l.payment_id AS ledger_payment_id, i.in_inbox"                  \
    "      FROM touched t"                                                                         \
    "      LEFT JOIN LATERAL (SELECT payment_id, status, amount_cents, settled_at FROM payments"   \
    "                          WHERE event_id = t.event_id LIMIT 1) p ON true"                     \
    "      CROSS JOIN LATERAL (SELECT count(*) > 0 AS in_inbox FROM inbox"                         \
    "                          WHERE event_id = t.event_id) i"                                     \
    "      CROSS JOIN LATERAL (SELECT count(*) AS n, min(payment_id) AS payment_id,"               \
    "               sum(amount_cents) FILTER (WHERE side = 'debit') AS debit,"                     \
    "               sum(amount_cents) FILTER (WHERE side = 'credit') AS credit"                    \
    "          FROM ledger_entries WHERE event_id = t.event_id) l) "                               \
    "(SELECT 0, payment_id FROM e WHERE status = 'settled' AND (n <> 2 OR debit IS DISTINCT FROM " \
    "   amount_cents OR credit IS DISTINCT FROM amount_cents) ORDER BY 2 LIMIT 21) "               \
    "UNION ALL "                                                                                   \
    "(SELECT 1, coalesce(payment_id, ledger_payment_id) FROM e "                                   \
    "  WHERE n > 0 AND status IS DISTINCT FROM 'settled' ORDER BY 2 LIMIT 21) "                    \
    "UNION ALL "                                                                                   \
    "(SELECT 2, event_id FROM e WHERE (in_inbox AND status IS DISTINCT FROM 'settled') "           \
    "   OR (NOT in_inbox AND status = 'settled' "                                                  \
    "       AND settled_at > now() - make_interval(days => $2::int)) ORDER BY 2 LIMIT 21)"

/* A clean report: the events written before $1 (its horizon) less the recheck margin passed. */
#define ADVANCE_SQL                                                                                \
    "UPDATE reconciliation_checkpoint SET verified_before = $1::timestamptz - "                    \
    "make_interval(secs => " RECHECK_SECONDS "), updated_at = now() "                              \
    "WHERE verified_before < $1::timestamptz - make_interval(secs => " RECHECK_SECONDS ")"

/* One check's result into @list; its warning logged. */
static void check_add(json_t *list, const char *name, const char *detail, json_t *offending, int n,
                      bool *all_ok)
{
    json_array_append_new(list, json_pack("{s:s,s:b,s:o,s:b,s:s}", "name", name, "ok", n == 0,
                                          "offending", offending, "truncated", n > OFFENDERS_MAX,
                                          "detail", detail));
    if (n != 0) {
        *all_ok = false;
        log_warn("reconciliation_failed", "check=%s offending=%d", name, n);
    }
}

/* A statement with text parameters; its rows into *@res (owned) on GW_OK. */
static gw_err query(db_conn *db, const char *what, const char *sql, int n, const char *const *p,
                    PGresult **res)
{
    PGresult *r = PQexecParams(db_pg(db), sql, n, NULL, p, NULL, NULL, 0);
    gw_err err = db_check(r, PGRES_TUPLES_OK, what);

    if (err == GW_OK)
        *res = r;
    else
        PQclear(r);
    return err;
}

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
    check_add(list, "bank_agrees", detail, offending, n, all_ok);
    PQclear(res);
    free(text);
    json_decref(bank);
    return GW_OK;
}

static json_t *totals(PGresult *res, long *stale)
{
    json_t *by_status = json_object();

    *stale = 0;
    for (int i = 0; i < PQntuples(res); i++) {
        json_object_set_new(
            by_status, PQgetvalue(res, i, 0),
            json_pack("{s:I,s:I}", "count", (json_int_t)strtoll(PQgetvalue(res, i, 1), NULL, 10),
                      "amount_cents", (json_int_t)strtoll(PQgetvalue(res, i, 2), NULL, 10)));
        *stale += strtol(PQgetvalue(res, i, 3), NULL, 10);
    }
    return by_status;
}

/* The three ledger checks on the events written since @since; *@clean: all three held. */
static gw_err window_checks(db_conn *db, const gw_config *cfg, const char *since, json_t *list,
                            bool *all_ok, bool *clean)
{
    json_t *offending[CHECK_STALE];
    int n[CHECK_STALE] = {0};
    char days[16], detail[320];
    const char *params[2] = {since, days};
    PGresult *res;

    snprintf(days, sizeof days, "%d", cfg->inbox_retention_days);
    if (query(db, "reconciliation_window", WINDOW_SQL, 2, params, &res) != GW_OK)
        return GW_ERR_DB;
    for (int c = 0; c < CHECK_STALE; c++)
        offending[c] = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        int c = atoi(PQgetvalue(res, i, 0));

        if (c >= 0 && c < CHECK_STALE && ++n[c] <= OFFENDERS_MAX)
            json_array_append_new(offending[c], json_string(PQgetvalue(res, i, 1)));
    }
    PQclear(res);
    *clean = true;
    for (int c = 0; c < CHECK_STALE; c++) {
        if (strcmp(since, "-infinity") == 0)
            snprintf(detail, sizeof detail, "%s (read: every event)", checks[c].detail);
        else
            snprintf(detail, sizeof detail,
                     "%s (read: the events written since %s; ?full=true reads every event)",
                     checks[c].detail, since);
        check_add(list, checks[c].name, detail, offending[c], n[c], all_ok);
        *clean &= n[c] == 0;
    }
    return GW_OK;
}

static gw_err stale_check(db_conn *db, const gw_config *cfg, long stale, json_t *list, bool *all_ok)
{
    json_t *offending = json_array();
    char slo[16];
    const char *params[1] = {slo};
    PGresult *res;
    int n = 0;

    snprintf(slo, sizeof slo, "%d", cfg->relay_slo_seconds);
    if (stale > 0) { /* the totals' scan counted them: list them */
        if (query(db, "reconciliation_stale", STALE_SQL, 1, params, &res) != GW_OK) {
            json_decref(offending);
            return GW_ERR_DB;
        }
        n = PQntuples(res);
        for (int i = 0; i < n && i < OFFENDERS_MAX; i++)
            json_array_append_new(offending, json_string(PQgetvalue(res, i, 0)));
        PQclear(res);
    }
    check_add(list, checks[CHECK_STALE].name, checks[CHECK_STALE].detail, offending, n, all_ok);
    return GW_OK;
}

/* The time before which every row is final, asked before the report's snapshot (sql/0020). */
static gw_err horizon(db_conn *db, char *out, size_t len)
{
    PGresult *res;

    if (query(db, "reconciliation_horizon", "SELECT reconciliation_horizon()", 0, NULL, &res) !=
        GW_OK)
        return GW_ERR_DB;
    snprintf(out, len, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return GW_OK;
}

/* Everything read in one REPEATABLE READ snapshot: no check sees a payment between two writes. */
static gw_err report(db_conn *db, const gw_config *cfg, bool full, json_t *list, json_t **by_status,
                     bool *all_ok, bool *clean)
{
    char slo[16], since[64] = "-infinity";
    const char *params[1] = {slo};
    PGresult *res;
    long stale;

    snprintf(slo, sizeof slo, "%d", cfg->relay_slo_seconds);
    if (!full) {
        if (query(db, "reconciliation_checkpoint",
                  "SELECT verified_before FROM reconciliation_checkpoint", 0, NULL, &res) != GW_OK)
            return GW_ERR_DB;
        if (PQntuples(res) == 1)
            snprintf(since, sizeof since, "%s", PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    if (query(db, "reconciliation_totals", TOTALS_SQL, 1, params, &res) != GW_OK)
        return GW_ERR_DB;
    *by_status = totals(res, &stale);
    PQclear(res);
    if (window_checks(db, cfg, since, list, all_ok, clean) != GW_OK ||
        stale_check(db, cfg, stale, list, all_ok) != GW_OK ||
        (cfg->bank_url != NULL && bank_check(db, cfg, list, all_ok) != GW_OK))
        return GW_ERR_DB;
    return GW_OK;
}

gw_err reconcile_run(db_conn *db, const gw_config *cfg, bool full, json_t **out)
{
    json_t *list = json_array(), *by_status = NULL;
    bool all_ok = true, clean = false;
    char until[64];

    if (horizon(db, until, sizeof until) != GW_OK ||
        db_begin(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") != GW_OK)
        goto fail;
    if (db_exec(db, REPORT_TIMEOUT) != GW_OK ||
        report(db, cfg, full, list, &by_status, &all_ok, &clean) != GW_OK) {
        db_rollback(db);
        goto fail;
    }
    db_rollback(db); /* read only: nothing to commit */
    if (clean) {
        const char *params[1] = {until};
        PGresult *res = PQexecParams(db_pg(db), ADVANCE_SQL, 1, NULL, params, NULL, NULL, 0);

        /* the report stands either way; the next one reads from the old checkpoint */
        if (db_check(res, PGRES_COMMAND_OK, "reconciliation_advance") != GW_OK)
            log_warn("reconciliation_checkpoint_kept", "horizon=\"%s\"", until);
        PQclear(res);
    }
    *out = json_pack("{s:o,s:o,s:b}", "by_status", by_status, "checks", list, "ok", all_ok);
    return GW_OK;
fail:
    json_decref(list);
    json_decref(by_status);
    return GW_ERR_DB;
}
