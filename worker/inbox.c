/* worker/inbox.c - settle_payment() in sql/0002 does the work; this wraps the transaction */
#include "worker/inbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/failpoint.h"

const db_stmt inbox_stmts[] = {
    {"inbox_seen", "SELECT 1 FROM inbox WHERE event_id = $1"},
    {"settle", "SELECT outcome, seconds FROM settle_payment($1, $2, $3::int)"},
    {"mark_retrying",
     "UPDATE payments SET status = 'retrying', attempts = $3::int, last_error = $4, "
     "updated_at = now() WHERE payment_id = $1 AND event_id = $2 "
     "AND payment_status_rank(status) <= payment_status_rank('retrying')"},
    {"mark_dead",
     "UPDATE payments SET status = 'dead_lettered', attempts = greatest(attempts, $3::int), "
     "last_error = $4, updated_at = now() WHERE payment_id = $1 AND event_id = $2 "
     "AND status <> 'settled'"},
    {"inbox_purge", "DELETE FROM inbox WHERE event_id IN (SELECT event_id FROM inbox "
                    "WHERE processed_at < now() - make_interval(days => $1::int) LIMIT $2::int)"},
};
const size_t inbox_nstmts = sizeof inbox_stmts / sizeof inbox_stmts[0];

gw_err inbox_seen(db_conn *db, const char *event_id, bool *seen)
{
    const char *params[1] = {event_id};
    PGresult *res = db_prepared(db, "inbox_seen", 1, params);
    gw_err err = db_check(res, PGRES_TUPLES_OK, "inbox_seen");

    if (err == GW_OK)
        *seen = PQntuples(res) > 0;
    PQclear(res);
    return err;
}

gw_err inbox_settle(db_conn *db, const payment *p, int attempt, inbox_outcome *out,
                    double *accept_to_settle_s)
{
    char att[16];
    const char *params[3] = {p->event_id, p->payment_id, att};
    PGresult *res = NULL;
    const char *outcome;
    gw_err err;

    snprintf(att, sizeof att, "%d", attempt);
    if ((err = db_begin(db, NULL)) != GW_OK)
        return err;
    res = db_prepared(db, "settle", 3, params);
    if ((err = db_check(res, PGRES_TUPLES_OK, "settle")) != GW_OK || PQntuples(res) != 1) {
        err = err != GW_OK ? err : GW_ERR_DB;
        goto rollback;
    }
    outcome = PQgetvalue(res, 0, 0);
    if (strcmp(outcome, "settled") != 0) {
        *out = strcmp(outcome, "duplicate") == 0  ? INBOX_DUPLICATE
               : strcmp(outcome, "terminal") == 0 ? INBOX_TERMINAL
                                                  : INBOX_UNKNOWN;
        PQclear(res);
        return db_exec(db, "ROLLBACK"); /* nothing to keep */
    }
    *out = INBOX_SETTLED;
    *accept_to_settle_s = atof(PQgetvalue(res, 0, 1));
    if ((err = failpoint_hit("worker.before_commit")) != GW_OK)
        goto rollback;
    err = db_exec(db, "COMMIT");
    PQclear(res);
    return err;
rollback:
    db_rollback(db);
    PQclear(res);
    return err;
}

static gw_err mark(db_conn *db, const char *stmt, const char *payment_id, const char *event_id,
                   int attempt, const char *why)
{
    char att[16];
    const char *params[4] = {payment_id, event_id, att, why};
    PGresult *res;
    gw_err err;

    snprintf(att, sizeof att, "%d", attempt);
    res = db_prepared(db, stmt, 4, params);
    err = db_check(res, PGRES_COMMAND_OK, stmt);
    PQclear(res);
    return err;
}

gw_err inbox_mark_retrying(db_conn *db, const payment *p, int attempt, const char *why)
{
    return mark(db, "mark_retrying", p->payment_id, p->event_id, attempt, why);
}

gw_err inbox_mark_dead(db_conn *db, const char *payment_id, const char *event_id, int attempt,
                       const char *why)
{
    return mark(db, "mark_dead", payment_id, event_id, attempt, why);
}

gw_err inbox_purge(db_conn *db, int days, int limit, long *deleted)
{
    char d[16], l[16];
    const char *params[2] = {d, l};
    PGresult *res;
    gw_err err;

    snprintf(d, sizeof d, "%d", days);
    snprintf(l, sizeof l, "%d", limit);
    res = db_prepared(db, "inbox_purge", 2, params);
    err = db_check(res, PGRES_COMMAND_OK, "inbox_purge");
    *deleted = err == GW_OK ? atol(PQcmdTuples(res)) : 0;
    PQclear(res);
    return err;
}
