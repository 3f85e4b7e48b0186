/* worker/relay/outbox.c - claim, mark and purge outbox rows */
#include "worker/relay/outbox.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/payment_status.h"

struct outbox_batch {
    PGresult *res; /* owns the strings the rows point to */
    size_t n;
    outbox_row *rows;
};

const db_stmt outbox_stmts[] = {
    /* oldest first, FOR UPDATE SKIP LOCKED, by outbox_pending's primary key (sql/0019) */
    {"outbox_claim", "SELECT id, event_id, payment_id, routing_key, body, traceparent, attempt "
                     "FROM claim_outbox($1::int)"},
    /* the status moves only as payment_may_move() allows: a settled payment stays settled */
    {"outbox_published", PAYMENT_STATUS_SQL_PUBLISHED},
    {"outbox_unroutable", PAYMENT_STATUS_SQL_UNROUTABLE},
    /* a nack is the broker's state (a full queue, no majority), not the row's: 1, 2, 4, then
     * 5 s, so the backlog moves within seconds of the queue having room (docs/decisions.md, 27) */
    {"outbox_nacked",
     "UPDATE outbox SET publish_attempts = publish_attempts + 1, last_error = $2, "
     "next_attempt_at = now() + make_interval(secs => least(5, 2 ^ least(publish_attempts, 3))) "
     "WHERE id = ANY($1::bigint[]) AND state = 'pending'"},
    {"outbox_purge", "SELECT deleted, next_after FROM purge_outbox($1::bigint, $2::int, $3::int)"},
    {"outbox_rearm", "SELECT rearm_lost_retries($1::int, $2::int)"},
    {"outbox_backlog", "SELECT pending, oldest_age_seconds FROM outbox_backlog()"}, /* sql/0021 */
};
const size_t outbox_nstmts = sizeof outbox_stmts / sizeof outbox_stmts[0];

gw_err outbox_begin_claim(db_conn *db, int limit, outbox_batch **out)
{
    char lim[16];
    const char *params[1] = {lim};
    outbox_batch *b = calloc(1, sizeof *b);
    gw_err err;

    if (b == NULL)
        return GW_ERR_NOMEM;
    snprintf(lim, sizeof lim, "%d", limit);
    b->res = db_begin_prepared(db, "outbox_claim", 1, params);
    if ((err = db_check(b->res, PGRES_TUPLES_OK, "outbox_claim")) != GW_OK) {
        outbox_batch_free(b);
        return err;
    }
    b->n = (size_t)PQntuples(b->res);
    b->rows = calloc(b->n ? b->n : 1, sizeof *b->rows);
    if (b->rows == NULL) {
        outbox_batch_free(b);
        return GW_ERR_NOMEM;
    }
    for (size_t i = 0; i < b->n; i++) {
        outbox_row *r = &b->rows[i];
        int row = (int)i;

        r->id = strtoll(PQgetvalue(b->res, row, 0), NULL, 10);
        r->event_id = PQgetvalue(b->res, row, 1); /* borrowed from res: valid until PQclear */
        r->payment_id = PQgetvalue(b->res, row, 2);
        r->routing_key = PQgetvalue(b->res, row, 3);
        r->body = PQgetvalue(b->res, row, 4);
        r->body_len = (size_t)PQgetlength(b->res, row, 4);
        r->traceparent = PQgetisnull(b->res, row, 5) ? NULL : PQgetvalue(b->res, row, 5);
        r->attempt = atoi(PQgetvalue(b->res, row, 6));
    }
    *out = b;
    return GW_OK;
}

void outbox_batch_free(outbox_batch *b)
{
    if (b == NULL)
        return;
    PQclear(b->res);
    free(b->rows);
    free(b);
}

size_t outbox_batch_len(const outbox_batch *b)
{
    return b->n;
}

outbox_row *outbox_batch_row(outbox_batch *b, size_t i)
{
    return &b->rows[i];
}

char *outbox_id_array(const outbox_row *rows, size_t n, outbox_fate fate, bool *oom)
{
    size_t cap = 3 + n * 21, len = 0; /* an int64 is at most 20 characters, and a comma */
    char *s = malloc(cap);

    *oom = s == NULL;
    if (s == NULL)
        return NULL;
    s[len++] = '{';
    for (size_t i = 0; i < n; i++)
        if (rows[i].fate == fate)
            len +=
                (size_t)snprintf(s + len, cap - len, "%s%" PRId64, len > 1 ? "," : "", rows[i].id);
    if (len == 1) {
        free(s);
        return NULL;
    }
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

/* a mark: prepared @stmt on @ids (and @why); the last one of a batch carries the COMMIT */
typedef struct mark {
    const char *stmt;
    char *ids;
    const char *why;
} mark;

static gw_err exec_mark(db_conn *db, const mark *m, bool commit)
{
    const char *params[2] = {m->ids, m->why};
    int n = m->why ? 2 : 1;
    PGresult *res;
    gw_err err;

    if (commit)
        return db_prepared_commit(db, m->stmt, n, params);
    res = db_prepared(db, m->stmt, n, params);
    err = db_check(res, PGRES_COMMAND_OK, m->stmt);
    PQclear(res);
    return err;
}

gw_err outbox_mark_commit(db_conn *db, const outbox_batch *b)
{
    mark *marks = calloc(b->n + 2, sizeof *marks);
    size_t n = 0;
    bool oom = marks == NULL;
    gw_err err = GW_OK;

    if (!oom && (marks[n].ids = outbox_id_array(b->rows, b->n, OUTBOX_CONFIRMED, &oom)) != NULL)
        marks[n++].stmt = "outbox_published";
    if (!oom && (marks[n].ids = outbox_id_array(b->rows, b->n, OUTBOX_NACKED, &oom)) != NULL) {
        marks[n].why = "not confirmed by the broker";
        marks[n++].stmt = "outbox_nacked";
    }
    for (size_t i = 0; i < b->n && !oom; i++) {
        if (b->rows[i].fate != OUTBOX_RETURNED)
            continue;
        if ((marks[n].ids = malloc(24)) == NULL) {
            oom = true;
            break;
        }
        snprintf(marks[n].ids, 24, "%" PRId64, b->rows[i].id);
        marks[n].why = b->rows[i].why;
        marks[n++].stmt = "outbox_unroutable";
    }
    if (oom)
        err = GW_ERR_NOMEM;
    for (size_t i = 0; i < n && err == GW_OK; i++)
        err = exec_mark(db, &marks[i], i + 1 == n);
    if (err == GW_OK && n == 0)
        err = db_commit(db); /* nothing to mark: every row unsettled */
    for (size_t i = 0; marks != NULL && i < n + 1; i++)
        free(marks[i].ids);
    free(marks);
    return err;
}

gw_err outbox_purge(db_conn *db, int hours, int limit, int64_t *after, long *deleted)
{
    char from[24], h[16], lim[16];
    const char *params[3] = {from, h, lim};
    PGresult *res;
    gw_err err;

    snprintf(from, sizeof from, "%" PRId64, *after);
    snprintf(h, sizeof h, "%d", hours);
    snprintf(lim, sizeof lim, "%d", limit);
    res = db_prepared(db, "outbox_purge", 3, params);
    if ((err = db_check(res, PGRES_TUPLES_OK, "outbox_purge")) == GW_OK) {
        *deleted = atol(PQgetvalue(res, 0, 0));
        *after = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    }
    PQclear(res);
    return err;
}

gw_err outbox_backlog(db_conn *db, long *pending, double *oldest_age_s)
{
    PGresult *res = db_prepared(db, "outbox_backlog", 0, NULL);
    gw_err err = db_check(res, PGRES_TUPLES_OK, "outbox_backlog");

    if (err == GW_OK) {
        *pending = atol(PQgetvalue(res, 0, 0));
        *oldest_age_s = atof(PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return err;
}

gw_err outbox_rearm(db_conn *db, int after_s, int limit, long *rearmed)
{
    return db_prepared_rows(db, "outbox_rearm", after_s, limit, rearmed);
}
