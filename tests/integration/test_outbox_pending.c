/*
 * tests/integration/test_outbox_pending.c - the list of pending outbox rows, the HOT mark and
 * the purge's position (sql/0019)
 *
 * outbox_pending must hold exactly the rows whose state is 'pending' after every kind of write
 * (insert, the relay's mark, a nack, a rearm, a delete). The relay's mark
 * (PAYMENT_STATUS_SQL_PUBLISHED) must be a HOT update of the outbox row: before sql/0019 `state`
 * was in two index predicates and no mark was. purge_outbox() deletes old published rows only,
 * and the position it returns never passes a row a later call must see again. claim_outbox()
 * reads the list by its primary key even when the statistics say it is empty (a first version
 * read every outbox row from the oldest instead: 284 ms a claim with 100,000 pending rows).
 * outbox_backlog() (sql/0021) counts the list, up to a limit when given one, and gives the age
 * of its oldest row. The triggers find the list entries a mark or a delete removes by probes of
 * its primary key on stale statistics too (sql/0022).
 */
#include <stdio.h>
#include <stdlib.h>

#include "shared/payment_status.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"

static tdb *db;

/* rows whose state and presence in outbox_pending disagree */
static long long mismatches(void)
{
    return tdb_long(db,
                    "SELECT count(*) FROM outbox o FULL JOIN outbox_pending p ON p.id = o.id "
                    "WHERE (o.state = 'pending') IS DISTINCT FROM (p.id IS NOT NULL)",
                    NULL);
}

static long long base_id(void)
{
    return tdb_long(db, "SELECT min(id) - 1 FROM outbox", NULL);
}

/* one call of purge_outbox(@after, 24 h, @limit): the deleted count; *@after moves on */
static long long purge(long long *after, int limit)
{
    char from[24], lim[16], *res;
    long long deleted = -1;

    snprintf(from, sizeof from, "%lld", *after);
    snprintf(lim, sizeof lim, "%d", limit);
    res = tdb_value(
        db, "SELECT deleted || ' ' || next_after FROM purge_outbox($1::bigint, 24, $2::int)", from,
        lim, NULL);
    if (res == NULL || sscanf(res, "%lld %lld", &deleted, after) != 2)
        *after = -1;
    free(res);
    return deleted;
}

/* @table's counter @column in pg_stat_user_tables, after a flush of this session's counts */
static long long table_stat(const char *table, const char *column)
{
    char sql[160];

    CHECK(tdb_exec(db, "SELECT pg_stat_force_next_flush()", NULL));
    snprintf(sql, sizeof sql, "SELECT %s FROM pg_stat_user_tables WHERE relname = '%s'", column,
             table);
    return tdb_long(db, sql, NULL);
}

static long long outbox_stat(const char *column)
{
    return table_stat("outbox", column);
}

/* 20,000 published rows, statistics that saw no pending row, then 20,000 pending ones: a claim
 * of 1,024 reads 1,024 outbox rows, by index */
static void claim_with_stale_statistics(void)
{
    long long seq, fetched;

    CHECK(tdb_exec(db,
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body, state, "
                   "published_at) SELECT 'cl-old' || g, 'cl-old' || g, 'k', '{}', 'published', "
                   "now() FROM generate_series(1, 20000) g",
                   NULL));
    CHECK(tdb_exec(db, "VACUUM ANALYZE outbox_pending", NULL));
    CHECK(tdb_exec(db, "ANALYZE outbox", NULL));
    CHECK(
        tdb_exec(db,
                 "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                 "SELECT 'cl-new' || g, 'cl-new' || g, 'k', '{}' FROM generate_series(1, 20000) g",
                 NULL));
    seq = outbox_stat("seq_tup_read");
    fetched = outbox_stat("idx_tup_fetch");
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM claim_outbox(1024)", NULL), 1024);
    seq = outbox_stat("seq_tup_read") - seq;
    fetched = outbox_stat("idx_tup_fetch") - fetched;
    printf("claim of 1024 of 20000 pending rows: %lld outbox rows read by index, %lld by scan\n",
           fetched, seq);
    CHECK_INT(seq, 0);
    CHECK(fetched >= 1024 && fetched <= 1100);
    CHECK(tdb_exec(db, "DELETE FROM outbox WHERE event_id LIKE 'cl-%'", NULL));
}

/* outbox_pending's entries read by @sql, run on the ids ($1) of 256 pending 'mk-new' rows */
static long long list_entries_read(const char *sql)
{
    long long read;
    char *ids = tdb_value(db,
                          "SELECT array_agg(id)::text FROM (SELECT id FROM outbox WHERE event_id "
                          "LIKE 'mk-new%' AND state = 'pending' ORDER BY id LIMIT 256) s",
                          NULL);

    CHECK(ids != NULL);
    read = table_stat("outbox_pending", "idx_tup_fetch");
    CHECK(tdb_exec(db, sql, ids ? ids : "{}", NULL));
    read = table_stat("outbox_pending", "idx_tup_fetch") - read;
    free(ids);
    return read;
}

/* statistics that saw outbox_pending nearly empty on many pages, then 20,000 pending rows in
 * those pages: marking 256 of them, and deleting 256 others, probes the list's primary key 256
 * times each. sql/0019's update trigger joined the transition table to the list, planned as a
 * hash join over the whole list: every mark read the whole backlog (20,500 entries here; sql/0022).
 * Its delete trigger happened to be planned by probes: that check only guards it. */
static void triggers_with_stale_statistics(void)
{
    long long read;

    CHECK(tdb_exec(db,
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                   "SELECT 'mk-old' || g, 'mk-old' || g, 'k', '{}' FROM generate_series(1, 20000) "
                   "g ORDER BY g",
                   NULL));
    CHECK(tdb_exec(db,
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                   "VALUES ('mk-tail', 'mk-tail', 'k', '{}')",
                   NULL));
    CHECK(tdb_exec(db,
                   "UPDATE outbox SET state = 'published', published_at = now() "
                   "WHERE event_id LIKE 'mk-old%'",
                   NULL));
    /* the tail row keeps the emptied pages: the statistics see a few rows on many pages */
    CHECK(tdb_exec(db, "VACUUM ANALYZE outbox_pending", NULL));
    CHECK(tdb_exec(db,
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                   "SELECT 'mk-new' || g, 'mk-new' || g, 'k', '{}' FROM generate_series(1, 20000) "
                   "g ORDER BY g",
                   NULL));
    CHECK(tdb_long(db, "SELECT count(*) FROM outbox_pending", NULL) > 20000);

    read = list_entries_read("UPDATE outbox SET state = 'published', published_at = now() "
                             "WHERE id = ANY ($1::bigint[])");
    printf("mark of 256 of %lld pending rows: %lld list entries read\n",
           tdb_long(db, "SELECT count(*) FROM outbox_pending", NULL) + 256, read);
    CHECK(read >= 256 && read <= 600);
    read = list_entries_read("DELETE FROM outbox WHERE id = ANY ($1::bigint[])");
    printf("delete of 256 pending rows: %lld list entries read\n", read);
    CHECK(read >= 256 && read <= 600);
    CHECK_INT(mismatches(), 0);
    CHECK(tdb_exec(db, "DELETE FROM outbox WHERE event_id LIKE 'mk-%'", NULL));
}

/* outbox_backlog(): nothing pending is (0, 0); five pending, the oldest 90 s old */
static void backlog(void)
{
    CHECK_SQL_STR(db, "SELECT pending || ' ' || oldest_age_seconds FROM outbox_backlog()", "0 0");
    CHECK(tdb_exec(db,
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body, created_at) "
                   "SELECT 'bl-' || g, 'bl-' || g, 'k', '{}', now() - make_interval(secs => "
                   "CASE g WHEN 1 THEN 90 ELSE 5 END) FROM generate_series(1, 5) g ORDER BY g",
                   NULL));
    CHECK(tdb_exec(db,
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body, state, "
                   "published_at, created_at) VALUES ('bl-pub', 'bl-pub', 'k', '{}', "
                   "'published', now(), now() - interval '1 hour')",
                   NULL));
    CHECK_INT(tdb_long(db, "SELECT pending FROM outbox_backlog()", NULL), 5);
    CHECK_INT(tdb_long(db, "SELECT pending FROM outbox_backlog(3)", NULL), 3);
    CHECK_INT(tdb_long(db, "SELECT oldest_age_seconds::int FROM outbox_backlog()", NULL), 90);
    CHECK(tdb_exec(db, "DELETE FROM outbox WHERE event_id LIKE 'bl-%'", NULL));
    CHECK_INT(tdb_long(db, "SELECT pending FROM outbox_backlog()", NULL), 0);
}

static void run(void)
{
    long long base, after, upd, hot;
    char *ids;

    backlog();

    /* 2,000 accepted payments with their outbox rows: all listed */
    CHECK(tdb_exec(db,
                   "WITH s AS (SELECT g, 'op-e' || g AS e, 'op-p' || g AS p "
                   "FROM generate_series(1, 2000) g), "
                   "pay AS (INSERT INTO payments (payment_id, event_id, method, decision, "
                   "amount_cents, currency, payee_bank, payee_account) "
                   "SELECT p, e, 'pix', 'approved', 100 + g, 'BRL', '001', '1234-5' FROM s) "
                   "INSERT INTO outbox (event_id, payment_id, routing_key, body) "
                   "SELECT e, p, 'payment.pix.approved', '{}' FROM s ORDER BY g",
                   NULL));
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox_pending", NULL), 2000);
    CHECK_INT(mismatches(), 0);
    base = base_id();

    /* the relay's mark of the first 1,500: listed no more, and HOT */
    {
        char b[24], *sql = NULL;

        snprintf(b, sizeof b, "%lld", base);
        ids = tdb_value(db,
                        "SELECT array_agg(id ORDER BY id)::text FROM outbox "
                        "WHERE id <= $1::bigint + 1500",
                        b, NULL);
        if (!CHECK(ids != NULL))
            return;
        upd = outbox_stat("n_tup_upd");
        hot = outbox_stat("n_tup_hot_upd");
        if (asprintf(&sql, "PREPARE mark(bigint[]) AS %s", PAYMENT_STATUS_SQL_PUBLISHED) < 0)
            abort();
        CHECK(tdb_exec(db, sql, NULL));
        free(sql);
        if (asprintf(&sql, "EXECUTE mark('%s')", ids) < 0)
            abort();
        CHECK(tdb_exec(db, sql, NULL));
        free(sql);
        free(ids);
        upd = outbox_stat("n_tup_upd") - upd;
        hot = outbox_stat("n_tup_hot_upd") - hot;
        printf("mark of 1500 rows: %lld updates, %lld of them HOT\n", upd, hot);
        CHECK_INT(upd, 1500);
        CHECK(hot >= 1400); /* the page keeps room for the row's one later version */
    }
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox_pending", NULL), 500);
    CHECK_INT(mismatches(), 0);

    /* a nack keeps a row listed once; a rearm lists it again; a delete takes it out */
    CHECK(tdb_exec(db,
                   "UPDATE outbox SET publish_attempts = publish_attempts + 1 "
                   "WHERE state = 'pending'",
                   NULL));
    CHECK(tdb_exec(db,
                   "UPDATE outbox SET state = 'pending', published_at = NULL "
                   "WHERE event_id IN ('op-e1', 'op-e2')",
                   NULL));
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox_pending", NULL), 502);
    CHECK(tdb_exec(db, "DELETE FROM outbox WHERE event_id IN ('op-e1', 'op-e2000')", NULL));
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox_pending", NULL), 500);
    CHECK_INT(mismatches(), 0);

    /* the purge: rows 3..300 unroutable two days ago, 301..1000 published two days ago,
     * 1001..1500 published now, 1501.. pending (and row 2 pending again, from the rearm) */
    {
        char b[24];

        snprintf(b, sizeof b, "%lld", base);
        CHECK(tdb_exec(db,
                       "UPDATE outbox SET state = 'unroutable', created_at = now() - interval "
                       "'2 days', published_at = now() - interval '2 days' "
                       "WHERE id BETWEEN $1::bigint + 3 AND $1::bigint + 300",
                       b, NULL));
        CHECK(tdb_exec(db,
                       "UPDATE outbox SET created_at = now() - interval '2 days', "
                       "published_at = now() - interval '2 days' "
                       "WHERE id BETWEEN $1::bigint + 301 AND $1::bigint + 1000",
                       b, NULL));
    }
    after = base;
    /* 2..401: 301..401 deleted; row 2 is pending, so the position stays before it */
    CHECK_INT(purge(&after, 400), 101);
    CHECK_INT(after, base + 1);
    CHECK(tdb_exec(db,
                   "UPDATE outbox SET state = 'published', published_at = now() - "
                   "interval '2 days' WHERE event_id = 'op-e2'",
                   NULL));
    CHECK_INT(purge(&after, 400), 102); /* 2..300, 402..502: 2 and 402..502 */
    CHECK_INT(after, base + 502);       /* 3..300 are unroutable: passed, kept */
    CHECK_INT(purge(&after, 400), 400); /* 503..902 */
    CHECK_INT(after, base + 902);
    CHECK_INT(purge(&after, 400), 98); /* 903..1000 old, 1001.. recent: stops before 1001 */
    CHECK_INT(after, base + 1000);
    CHECK_INT(purge(&after, 400), 0);
    CHECK_INT(after, base + 1000);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox WHERE state = 'unroutable'", NULL), 298);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox WHERE state = 'published'", NULL), 500);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM outbox_pending", NULL), 499);
    CHECK_INT(mismatches(), 0);
    claim_with_stale_statistics();
    CHECK_INT(mismatches(), 0);
    triggers_with_stale_statistics();
    CHECK_INT(mismatches(), 0);
}

int main(void)
{
    return tdb_main("test_outbox_pending", true, &db, run);
}
