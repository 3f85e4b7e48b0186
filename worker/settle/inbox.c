/* worker/settle/inbox.c - settle_payment() in sql/0002 does the work; this wraps the transaction */
#include "worker/settle/inbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/failpoint.h"
#include "shared/lib/json_out.h"
#include "shared/lib/log.h"
#include "shared/lib/names.h"
#include "shared/payment_status.h"

const db_stmt inbox_stmts[] = {
    /* the status moves only as payment_may_move() allows; a refused move changes no row */
    {"mark_retrying", PAYMENT_STATUS_SQL_RETRYING},
    {"mark_dead", PAYMENT_STATUS_SQL_DEAD_LETTERED},
    {"inbox_purge", "DELETE FROM inbox WHERE event_id IN (SELECT event_id FROM inbox "
                    "WHERE processed_at < now() - make_interval(days => $1::int) LIMIT $2::int)"},
    {"inbox_seen_many", "SELECT event_id FROM inbox WHERE event_id = ANY($1::text[])"},
    /* WAL even for a batch of duplicates: its COMMIT waits for the standby to hold the inbox
     * rows it found (DB_SYNC_WRITE in shared/pg/db.h says why) */
    {"settle_batch", "SELECT idx, outcome, seconds FROM settle_batch($1::jsonb), "
                     "(" DB_SYNC_WRITE ") AS sync"},
};
const size_t inbox_nstmts = sizeof inbox_stmts / sizeof inbox_stmts[0];

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
    return db_prepared_rows(db, "inbox_purge", days, limit, deleted);
}

/* "{a,b}" of the event ids: [A-Za-z0-9._:-] needs no quoting in an array literal. */
static char *event_array(const inbox_item *items, int n)
{
    size_t cap = 3 + (size_t)n * (PAYMENT_ID_MAX + 1), len = 0;
    char *s = malloc(cap);

    if (s == NULL)
        return NULL;
    s[len++] = '{';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? "," : "", items[i].p->event_id);
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

gw_err inbox_seen_many(db_conn *db, const inbox_item *items, int n, bool *seen)
{
    char *ids = event_array(items, n);
    const char *params[1] = {ids};
    PGresult *res;
    gw_err err;

    if (ids == NULL)
        return GW_ERR_NOMEM;
    res = db_prepared(db, "inbox_seen_many", 1, params);
    err = db_check(res, PGRES_TUPLES_OK, "inbox_seen_many");
    for (int i = 0; i < n; i++) {
        seen[i] = false;
        for (int row = 0; err == GW_OK && row < PQntuples(res); row++)
            seen[i] = seen[i] || strcmp(PQgetvalue(res, row, 0), items[i].p->event_id) == 0;
    }
    PQclear(res);
    free(ids);
    return err;
}

/* settle_batch()'s outcome column, by outcome. */
static const char *const outcome_names[] = {
    [INBOX_SETTLED] = "settled",
    [INBOX_DUPLICATE] = "duplicate",
    [INBOX_TERMINAL] = "terminal",
    [INBOX_UNKNOWN] = "unknown_payment",
};

/*
 * One transaction for @items[order[0..n-1]]: on any error nothing is committed,
 * or (*@at_commit) the COMMIT's outcome is unknown; they all count as failed.
 */
static gw_err try_settle(db_conn *db, inbox_item *items, const int *order, int n, bool *at_commit)
{
    json_out o = {0};
    PGresult *res = NULL;
    char *text;
    gw_err err;

    json_out_open(&o, '[');
    for (int k = 0; k < n; k++) {
        const inbox_item *it = &items[order[k]];

        json_out_open(&o, '{');
        json_out_member(&o, "event_id", it->p->event_id);
        json_out_member(&o, "payment_id", it->p->payment_id);
        json_out_key(&o, "attempt");
        json_out_int(&o, it->attempt);
        if (it->bank_reference != NULL && it->bank_reference[0] != '\0')
            json_out_member(&o, "bank_reference", it->bank_reference);
        json_out_close(&o, '}');
    }
    json_out_close(&o, ']');
    if ((text = json_out_take(&o)) == NULL)
        return GW_ERR_NOMEM;
    /* the point before the COMMIT comes before the round trip that carries it (a crash here
     * commits nothing, as it did between the function and its COMMIT) */
    if ((err = failpoint_hit("worker.before_commit")) != GW_OK ||
        (err = db_batch_commit(db, "settle_batch", text, n, &res, at_commit)) != GW_OK)
        goto out;
    for (int row = 0; row < n; row++) {
        int k = atoi(PQgetvalue(res, row, 0)), outcome;
        inbox_item *it;

        if (k < 0 || k >= n) {
            err = GW_ERR_DB; /* committed, but no answer to read: all requeued, then duplicates */
            goto out;
        }
        it = &items[order[k]];
        outcome = NAMES_FIND(outcome_names, PQgetvalue(res, row, 1));
        it->failed = outcome < 0; /* an outcome this build does not know: requeued */
        it->outcome = outcome < 0 ? INBOX_UNKNOWN : (inbox_outcome)outcome;
        it->accept_to_settle_s = PQgetisnull(res, row, 2) ? 0 : atof(PQgetvalue(res, row, 2));
    }
out:
    for (int k = 0; err != GW_OK && k < n; k++)
        items[order[k]].failed = true;
    PQclear(res);
    free(text);
    return err;
}

/* What the batch is sorted by: an item's payment_id, with its index to keep. */
typedef struct settle_key {
    const char *payment_id; /* borrowed from the item */
    int i;
} settle_key;

/* payment_id as PostgreSQL's COLLATE "C" orders it; equal ids keep their delivery order. */
static int by_payment_id(const void *a, const void *b)
{
    const settle_key *x = a, *y = b;
    int c = strcmp(x->payment_id, y->payment_id);

    return c != 0 ? c : (x->i > y->i) - (x->i < y->i);
}

gw_err inbox_settle_batch(db_conn *db, inbox_item *items, int n)
{
    size_t len = (size_t)(n > 0 ? n : 1);
    settle_key *keys = malloc(len * sizeof *keys);
    int *order = calloc(len, sizeof *order);
    bool at_commit = false;
    gw_err err;

    if (keys == NULL || order == NULL) {
        free(keys);
        free(order);
        return GW_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        keys[i] = (settle_key){.payment_id = items[i].p->payment_id, .i = i};
        items[i].failed = true;
    }
    /* payment_id order: batches of several workers lock payment rows in the same order */
    qsort(keys, (size_t)n, sizeof *keys, by_payment_id);
    for (int k = 0; k < n; k++)
        order[k] = keys[k].i;
    free(keys);
    err = try_settle(db, items, order, n, &at_commit);
    /* a failed COMMIT is no bad item: each alone would fail (or wait) the same way */
    if (err != GW_OK && n > 1 && !at_commit && PQstatus(db_pg(db)) == CONNECTION_OK) {
        /* an unexpected error in one item aborted them all: settle each alone */
        log_warn("settle_batch_split", "items=%d", n);
        for (int k = 0; k < n; k++)
            if (try_settle(db, items, &order[k], 1, &at_commit) != GW_OK)
                log_warn("settle_item_failed", "event_id=%s", items[order[k]].p->event_id);
        err = GW_OK; /* each item now says for itself whether it failed */
    }
    free(order);
    return err;
}
