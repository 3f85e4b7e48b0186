/* shared/pg/db.c - libpq with checked results and reconnects */
#include "shared/pg/db.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shared/config.h"
#include "shared/lib/log.h"

struct db_conn {
    PGconn *pg;
    char *url;
    char *app;
    const db_stmt *stmts; /* borrowed */
    size_t nstmts;
    bool ready;           /* connected and prepared */
    bool sync_wait_ended; /* the server warned that a commit's wait for its standby ended */
};

/*
 * PostgreSQL ends a COMMIT's wait for the synchronous standby when the statement
 * is cancelled (statement_timeout among others) or the backend is told to go, and
 * then answers "COMMIT" with only a WARNING: the transaction is committed here but
 * perhaps on no standby, and a failover can lose it. The warning is the only sign,
 * so the receiver below flags it and db_exec()/db_prepared() turn that statement's
 * success into a failure whose outcome is unknown (docs/decisions.md, 22).
 */
static void db_notice(void *arg, const PGresult *res)
{
    db_conn *db = arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    char line[256];

    if (sev == NULL || strcmp(sev, "WARNING") != 0 || msg == NULL)
        return;
    db_message_line(msg, line, sizeof line);
    if (strstr(msg, "synchronous replication") != NULL) {
        db->sync_wait_ended = true;
        log_warn("db_sync_wait_ended", "app=%s message=\"%s\"", db->app, line);
        return;
    }
    log_warn("db_warning", "app=%s message=\"%s\"", db->app, line);
}

/* sync_wait_ended - true (once) when the statement just run may be committed on no standby. */
static bool sync_wait_ended(db_conn *db)
{
    bool ended = db->sync_wait_ended;

    db->sync_wait_ended = false;
    return ended;
}

void db_message_line(const char *msg, char *out, size_t len)
{
    snprintf(out, len, "%s", msg ? msg : "");
    out[strcspn(out, "\n")] = '\0'; /* the first line is the reason; the log escapes the rest */
}

gw_err db_check(const PGresult *res, ExecStatusType want, const char *stmt)
{
    const char *st, *msg;
    char line[256];

    if (PQresultStatus(res) == want) /* a NULL res reads as PGRES_FATAL_ERROR */
        return GW_OK;
    st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    /* a lost connection has no fields: the result's message (or none) says why */
    db_message_line(msg   ? msg
                    : res ? PQresultErrorMessage(res)
                          : "no result (connection lost)",
                    line, sizeof line);
    if (st && strcmp(st, "23505") == 0) {
        const char *constraint = PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);

        /* a committed row holds the key: the statement alone fails again on every retry */
        log_warn("db_unique_violation", "stmt=%s constraint=%s message=\"%s\"", stmt,
                 constraint ? constraint : "none", line);
        return GW_ERR_CONFLICT;
    }
    log_warn("db_error", "stmt=%s sqlstate=%s message=\"%s\"", stmt, st ? st : "none",
             line[0] ? line : "no result");
    if (st && (strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0))
        return GW_ERR_RETRY;
    return GW_ERR_DB;
}

static gw_err db_connect(db_conn *db)
{
    /*
     * Bounds for a database that can vanish without a word (a node lost with its
     * host, contract section 11): a connect tries each host of a multi-host URL for
     * 2 s; keepalives notice an idle connection to a dead server within 5 + 2 * 2 s;
     * tcp_user_timeout ends one whose sent data goes unacknowledged for 5 s. A
     * caller waits on no more than these plus statement_timeout.
     */
    const char *keys[] = {"dbname",           "application_name", "connect_timeout",
                          "keepalives",       "keepalives_idle",  "keepalives_interval",
                          "keepalives_count", "tcp_user_timeout", NULL};
    const char *vals[] = {db->url, db->app, "2", "1", "5", "2", "2", "5000", NULL};
    char target[160];
    PGresult *res;

    PQfinish(db->pg);
    db->ready = false;
    /* expand_dbname: the URL is parsed, then later keys override it */
    db->pg = PQconnectdbParams(keys, vals, 1);
    if (db->pg == NULL || PQstatus(db->pg) != CONNECTION_OK) {
        char why[256];

        db_message_line(db->pg ? PQerrorMessage(db->pg) : "out of memory", why, sizeof why);
        config_db_target(db->url, target, sizeof target);
        log_warn("db_connect_failed", "target=%s error=\"%s\"", target, why);
        return GW_ERR_DB;
    }
    db->sync_wait_ended = false;
    PQsetNoticeReceiver(db->pg, db_notice, db);
    /* shorter than the 10 s stop deadline, so a stuck query cannot hold a shutdown */
    if (db_exec(db, "SET statement_timeout = '" DB_STATEMENT_TIMEOUT "'") != GW_OK)
        return GW_ERR_DB;
    /* a transaction left open (a wait on the broker that never ends, a bug) cannot hold its
     * row locks and vacuum's horizon for longer than this: PostgreSQL ends the session */
    if (db_exec(db, "SET idle_in_transaction_session_timeout = '" DB_IDLE_IN_TRANSACTION "'") !=
        GW_OK)
        return GW_ERR_DB;
    for (size_t i = 0; i < db->nstmts; i++) {
        res = PQprepare(db->pg, db->stmts[i].name, db->stmts[i].sql, 0, NULL);
        if (db_check(res, PGRES_COMMAND_OK, db->stmts[i].name) != GW_OK) {
            PQclear(res);
            return GW_ERR_DB;
        }
        PQclear(res);
    }
    db->ready = true;
    return GW_OK;
}

gw_err db_open(const char *url, const char *app, const db_stmt *stmts, size_t n, bool lazy,
               db_conn **out)
{
    db_conn *db = calloc(1, sizeof *db);
    gw_err err;

    if (db == NULL)
        return GW_ERR_NOMEM;
    db->url = strdup(url);
    db->app = strdup(app);
    db->stmts = stmts;
    db->nstmts = n;
    err = db->url == NULL || db->app == NULL ? GW_ERR_NOMEM : db_connect(db);
    if (err == GW_ERR_DB && lazy)
        err = GW_OK; /* db_ensure() connects later */
    return GW_BUILT(err, db, db_close, out);
}

void db_close(db_conn *db)
{
    if (db == NULL)
        return;
    PQfinish(db->pg);
    free(db->url);
    free(db->app);
    free(db);
}

PGconn *db_pg(db_conn *db)
{
    return db->pg;
}

gw_err db_ensure(db_conn *db)
{
    if (db->ready && PQstatus(db->pg) == CONNECTION_OK &&
        PQtransactionStatus(db->pg) == PQTRANS_IDLE)
        return GW_OK;
    if (db->ready && PQstatus(db->pg) == CONNECTION_OK) {
        /* left inside a transaction by an earlier failure: end it, keep the connection */
        PQclear(PQexec(db->pg, "ROLLBACK"));
        if (PQtransactionStatus(db->pg) == PQTRANS_IDLE)
            return GW_OK;
    }
    if (db_connect(db) != GW_OK)
        return GW_ERR_DB;
    log_info("db_connected", "app=%s", db->app);
    return GW_OK;
}

bool db_healthy(db_conn *db)
{
    PGresult *res;
    bool ok;

    if (db_ensure(db) != GW_OK)
        return false;
    res = PQexec(db->pg, "SELECT 1");
    ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    PQclear(res);
    if (!ok && PQstatus(db->pg) != CONNECTION_OK && db_ensure(db) == GW_OK) {
        /* died while idle (the server restarted): the first use notices, a reconnect answers */
        res = PQexec(db->pg, "SELECT 1");
        ok = PQresultStatus(res) == PGRES_TUPLES_OK;
        PQclear(res);
    }
    return ok;
}

static long now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void cancel_query(db_conn *db)
{
    PGcancel *c = PQgetCancel(db->pg);
    char why[256] = "";

    if (c == NULL || !PQcancel(c, why, sizeof why))
        log_warn("db_cancel_failed", "app=%s error=\"%s\"", db->app,
                 why[0] ? why : "no cancel key");
    PQfreeCancel(c);
}

/*
 * await_result - the result of the query just sent, as PQexec() would return it
 * (its first error, else its last result). statement_timeout does not cover a
 * COMMIT's wait for the synchronous standby (the server stops the timer before
 * it commits), and with no standby that wait never ends: after @wait_ms we
 * ask the server to cancel, which ends the wait with the warning db_notice()
 * flags; if even that gets no answer within DB_CANCEL_WAIT_MS the connection is
 * given up (shut down, so libpq reports it broken).
 */
static PGresult *await_result(db_conn *db, int wait_ms)
{
    long due = now_ms() + wait_ms;
    bool cancelled = false, cut = false;
    PGresult *keep = NULL, *res;

    for (;;) {
        while (!PQisBusy(db->pg)) {
            if ((res = PQgetResult(db->pg)) == NULL)
                return keep;
            if (keep != NULL && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
                PQclear(res); /* the first error is the reason */
            } else {
                PQclear(keep);
                keep = res;
            }
        }
        struct pollfd pfd = {.fd = PQsocket(db->pg), .events = POLLIN};
        long left = due - now_ms();
        int ready = left > 0 ? poll(&pfd, 1, (int)left) : 0;

        if (ready != 0) {
            /* a broken connection makes PQisBusy() false and PQgetResult() say why */
            if (ready > 0)
                PQconsumeInput(db->pg);
            continue;
        }
        if (!cancelled) {
            log_warn("db_wait_cancelled", "app=%s waited_ms=%d", db->app, wait_ms);
            cancel_query(db);
            cancelled = true;
        } else if (!cut) {
            log_warn("db_connection_abandoned", "app=%s", db->app);
            shutdown(PQsocket(db->pg), SHUT_RDWR);
            cut = true;
        } else {
            return keep;
        }
        due = now_ms() + DB_CANCEL_WAIT_MS;
    }
}

/*
 * run - send @sql (or prepared @name with @params) and wait for it within the bounds above:
 * @wait_ms is DB_COMMIT_WAIT_MS for a COMMIT (only a COMMIT waits for the standby; any other
 * statement ends at statement_timeout), DB_WAIT_MS otherwise.
 */
static PGresult *run(db_conn *db, const char *sql, const char *name, int n,
                     const char *const *params, int wait_ms)
{
    int sent = sql ? PQsendQuery(db->pg, sql)
                   : PQsendQueryPrepared(db->pg, name, n, params, NULL, NULL, 0);

    if (!sent)
        return NULL; /* the connection is gone: db_check() says so */
    return await_result(db, wait_ms);
}

/* exec - db_exec() with its wait. */
static gw_err exec(db_conn *db, const char *sql, int wait_ms)
{
    PGresult *res = db->pg ? run(db, sql, NULL, 0, NULL, wait_ms) : NULL;
    gw_err err = db_check(res, PGRES_COMMAND_OK, sql);

    PQclear(res);
    if (err == GW_OK && sync_wait_ended(db)) {
        log_warn("db_outcome_unknown", "app=%s stmt=%s", db->app, sql);
        return GW_ERR_DB;
    }
    return err;
}

gw_err db_exec(db_conn *db, const char *sql)
{
    return exec(db, sql, DB_WAIT_MS);
}

gw_err db_commit(db_conn *db)
{
    return exec(db, "COMMIT", DB_COMMIT_WAIT_MS);
}

gw_err db_sync_barrier(db_conn *db)
{
    /* one round trip: a simple query may carry several statements */
    return exec(db, "BEGIN; " DB_SYNC_WRITE "; COMMIT", DB_COMMIT_WAIT_MS);
}

gw_err db_begin(db_conn *db, const char *sql)
{
    gw_err err = db_exec(db, sql ? sql : "BEGIN");

    if (err == GW_OK || PQstatus(db->pg) == CONNECTION_OK)
        return err;
    if (db_ensure(db) != GW_OK)
        return GW_ERR_DB;
    return db_exec(db, sql ? sql : "BEGIN");
}

void db_rollback(db_conn *db)
{
    /* a BEGIN sent with its first statement (db_begin_prepared()) may have opened nothing */
    if (PQstatus(db->pg) == CONNECTION_OK && PQtransactionStatus(db->pg) != PQTRANS_IDLE &&
        db_exec(db, "ROLLBACK") != GW_OK)
        log_warn("db_rollback_failed", "app=%s", db->app);
}

PGresult *db_prepared(db_conn *db, const char *name, int n, const char *const *params)
{
    PGresult *res = db->pg ? run(db, NULL, name, n, params, DB_WAIT_MS) : NULL;

    if (sync_wait_ended(db)) { /* a statement that committed by itself: its outcome is unknown */
        log_warn("db_outcome_unknown", "app=%s stmt=%s", db->app, name);
        PQclear(res);
        return NULL; /* db_check() reads it as a failure */
    }
    return res;
}

/*
 * pipelined - prepared @name sent in libpq's pipeline mode with a BEGIN before
 * it (@begin) or a COMMIT after it (@commit): one round trip where they take
 * two. PostgreSQL skips the COMMIT when the statement fails, so the
 * transaction is then left aborted for db_rollback(). The statement's result;
 * *@committed when the COMMIT succeeded. NULL when the connection broke on the
 * way (the session is then reset).
 *
 * The server holds a pipeline's results until its Sync unless asked to flush:
 * without the flush request after the statement, a COMMIT waiting for a lost
 * standby kept the statement's answer back too, and the wait was bounded by
 * DB_WAIT_MS instead of DB_COMMIT_WAIT_MS (tests/dbcluster/test_dbc_failover.c,
 * an accept with no standby answered in 11 s).
 */
static PGresult *pipelined(db_conn *db, bool begin, const char *name, int n,
                           const char *const *params, bool commit, const char *then, bool *began,
                           bool *committed, bool *then_ok)
{
    PGresult *begun = NULL, *res = NULL, *done = NULL, *after = NULL, *sync = NULL;
    bool sent, whole;

    *began = *committed = *then_ok = false;
    if (!PQenterPipelineMode(db->pg))
        return NULL;
    sent = (!begin || PQsendQueryParams(db->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0)) &&
           PQsendQueryPrepared(db->pg, name, n, params, NULL, NULL, 0) &&
           (!commit || (PQsendFlushRequest(db->pg) &&
                        PQsendQueryParams(db->pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0))) &&
           (then == NULL || PQsendQueryPrepared(db->pg, then, 0, NULL, NULL, NULL, 0)) &&
           PQpipelineSync(db->pg);
    if (sent) {
        begun = begin ? await_result(db, DB_WAIT_MS) : NULL;
        res = await_result(db, DB_WAIT_MS);
        done = commit ? await_result(db, DB_COMMIT_WAIT_MS) : NULL;
        after = then != NULL ? await_result(db, DB_WAIT_MS) : NULL;
        sync = await_result(db, DB_WAIT_MS);
    }
    /* an error in the BEGIN aborts the statement: its result then says so */
    whole = (!begin || begun != NULL) && res != NULL && (!commit || done != NULL) &&
            (then == NULL || after != NULL) && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    *began = begin && PQresultStatus(begun) == PGRES_COMMAND_OK;
    /* A COMMIT that answered has committed, whatever comes after it: a server told to stop
     * while it committed ends the session once the COMMIT is done, before the Sync's answer
     * (tests/faults db_restart answered such a batch 503, its retry a replay). */
    *committed = commit && res != NULL && PQresultStatus(done) == PGRES_COMMAND_OK;
    /* @then ran after the COMMIT (PostgreSQL skips it when anything before it failed), in a
     * transaction of its own that the Sync commits */
    *then_ok = *committed && PQresultStatus(after) == PGRES_TUPLES_OK &&
               PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(begun);
    PQclear(done);
    PQclear(after);
    PQclear(sync);
    if (!PQexitPipelineMode(db->pg) || !whole) {
        /* results still on the way: the session is in no state to reuse */
        db->ready = false;
        if (!*committed) {
            PQclear(res);
            return NULL;
        }
    }
    return res;
}

PGresult *db_begin_prepared(db_conn *db, const char *name, int n, const char *const *params)
{
    bool began = false, committed, then_ok;
    PGresult *res =
        db->pg ? pipelined(db, true, name, n, params, false, NULL, &began, &committed, &then_ok)
               : NULL;

    /* like db_begin(): a connection that died while idle is noticed by its BEGIN, and then
     * nothing ran, so once more on a fresh one is safe. A statement that ran and broke the
     * session (cut after its wait) is not run a second time. */
    if (!began && (PQstatus(db->pg) != CONNECTION_OK || !db->ready)) {
        PQclear(res);
        res = db_ensure(db) == GW_OK
                  ? pipelined(db, true, name, n, params, false, NULL, &began, &committed, &then_ok)
                  : NULL;
    }
    sync_wait_ended(db); /* nothing commits here */
    return res;
}

gw_err db_prepared_commit(db_conn *db, const char *name, int n, const char *const *params)
{
    bool began, committed = false, then_ok;
    PGresult *res =
        db->pg ? pipelined(db, false, name, n, params, true, NULL, &began, &committed, &then_ok)
               : NULL;
    gw_err err = db_check(res, PGRES_COMMAND_OK, name);

    PQclear(res);
    if (err == GW_OK && !committed) {
        log_warn("db_commit_failed", "app=%s stmt=%s", db->app, name);
        err = GW_ERR_DB;
    }
    if (sync_wait_ended(db)) {
        log_warn("db_outcome_unknown", "app=%s stmt=%s", db->app, name);
        err = GW_ERR_DB;
    }
    return err;
}

gw_err db_check_schema(db_conn *db)
{
    PGresult *res = PQexec(db->pg, "SELECT coalesce(max(version), 0) FROM schema_migrations");
    gw_err err = db_check(res, PGRES_TUPLES_OK, "schema_version");
    int have;

    if (err != GW_OK) {
        PQclear(res);
        log_error("schema_missing", "want=%d hint=\"run scripts/migrate\"", DB_SCHEMA_VERSION);
        return err;
    }
    have = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (have != DB_SCHEMA_VERSION) {
        log_error("schema_mismatch",
                  "have=%d want=%d hint=\"run scripts/migrate with this build's sql/\"", have,
                  DB_SCHEMA_VERSION);
        return GW_ERR_INVALID;
    }
    return GW_OK;
}

gw_err db_wait_schema(const char *url, const char *app, int wait_s)
{
    db_conn *db = NULL;
    char target[160];
    gw_err err;

    for (int waited = 0; db_open(url, app, NULL, 0, false, &db) != GW_OK; waited++) {
        if (waited >= wait_s) {
            config_db_target(url, target, sizeof target);
            log_error("db_unavailable", "target=%s waited_s=%d", target, waited);
            return GW_ERR_DB;
        }
        sleep(1);
    }
    err = db_check_schema(db);
    db_close(db);
    return err;
}

gw_err db_prepared_rows(db_conn *db, const char *name, int a, int b, long *rows)
{
    char pa[16], pb[16];
    const char *params[2] = {pa, pb};
    PGresult *res;
    gw_err err;

    snprintf(pa, sizeof pa, "%d", a);
    snprintf(pb, sizeof pb, "%d", b);
    res = db_prepared(db, name, 2, params);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        err = GW_OK; /* SELECT f($1, $2): the function returns the count */
        *rows = atol(PQgetvalue(res, 0, 0));
    } else {
        err = db_check(res, PGRES_COMMAND_OK, name);
        *rows = err == GW_OK ? atol(PQcmdTuples(res)) : 0;
    }
    PQclear(res);
    return err;
}

gw_err db_batch_commit(db_conn *db, const char *name, const char *json, int n, PGresult **res,
                       bool *at_commit)
{
    bool then_ok;

    return db_batch_commit_then(db, name, json, n, NULL, res, at_commit, &then_ok);
}

gw_err db_batch_commit_then(db_conn *db, const char *name, const char *json, int n,
                            const char *then, PGresult **res, bool *at_commit, bool *then_ok)
{
    const char *params[1] = {json};
    bool began = false, committed = false;
    gw_err err;

    *res = db->pg ? pipelined(db, true, name, 1, params, true, then, &began, &committed, then_ok)
                  : NULL;
    /* as in db_begin_prepared(): a BEGIN that found the connection dead ran nothing */
    if (!began && (PQstatus(db->pg) != CONNECTION_OK || !db->ready)) {
        PQclear(*res);
        *res = db_ensure(db) == GW_OK
                   ? pipelined(db, true, name, 1, params, true, then, &began, &committed, then_ok)
                   : NULL;
    }
    err = db_check(*res, PGRES_TUPLES_OK, name);
    /* the function failed: PostgreSQL skipped the COMMIT. Anything else after the BEGIN may
     * have committed: a COMMIT that failed or lost its standby, a connection that broke */
    *at_commit = began && !(*res != NULL && err != GW_OK);
    if (err == GW_OK && !committed) {
        log_warn("db_commit_failed", "app=%s stmt=%s", db->app, name);
        err = GW_ERR_DB;
    }
    if (sync_wait_ended(db) && err == GW_OK) {
        log_warn("db_outcome_unknown", "app=%s stmt=%s", db->app, name);
        err = GW_ERR_DB;
    }
    if (err == GW_OK && PQntuples(*res) != n) {
        log_warn("db_batch_rows", "app=%s stmt=%s want=%d got=%d", db->app, name, n,
                 PQntuples(*res));
        err = GW_ERR_DB;
    }
    if (err == GW_OK)
        return GW_OK;
    PQclear(*res);
    *res = NULL;
    db_rollback(db); /* an aborted transaction; nothing when the COMMIT ended it */
    return err;
}
