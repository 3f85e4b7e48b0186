/*
 * tests/integration/test_db_batch_commit.c - BEGIN, a batch and its COMMIT in one round trip
 *
 * db_batch_commit() carries the worker's settle batch (worker/settle/inbox.c) in one
 * round trip instead of two. What the caller must still be told apart: a batch
 * that committed (its rows), one that committed nothing (the function failed:
 * the batch may be split and run again), and one whose outcome is unknown (the
 * COMMIT failed, or the session broke after the BEGIN, or the answer does not
 * fit: never run again as if nothing had happened). The connection stays usable
 * after each, and a session that died while idle is reconnected once.
 *
 * A COMMIT that answered has committed even when the session ends before the
 * pipeline's Sync is answered (a server told to stop does that): a proxy between
 * the two cuts the connection right after the COMMIT's answer.
 *
 * db_batch_commit_then() adds a statement after the COMMIT in the same round trip
 * (the API's wake-up of the relay, docs/decisions.md 4): it runs and commits on its
 * own after a batch that committed, never after one that did not, and its failure
 * changes nothing in the batch's result.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shared/pg/db.h"
#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/tsock.h"

static const db_stmt stmts[] = {
    /* a row per item, as accept_batch() and settle_batch() answer */
    {"put", "INSERT INTO t (k) SELECT (e #>> '{}')::int FROM jsonb_array_elements($1::jsonb) e "
            "RETURNING k"},
    /* one row more than items */
    {"extra", "WITH i AS (INSERT INTO t (k) SELECT (e #>> '{}')::int "
              "FROM jsonb_array_elements($1::jsonb) e RETURNING k) "
              "SELECT k FROM i UNION ALL SELECT -1"},
    /* a deferred foreign key: the statement succeeds, its COMMIT fails */
    {"late", "INSERT INTO d (k) SELECT (e #>> '{}')::int FROM jsonb_array_elements($1::jsonb) e "
             "RETURNING k"},
    /* runs, then ends its own session: the sequence counts how often it ran */
    {"cut", "SELECT nextval('ran'), pg_terminate_backend(pg_backend_pid()) "
            "FROM jsonb_array_elements($1::jsonb)"},
    /* what db_batch_commit_then() runs after the COMMIT */
    {"then_put", "INSERT INTO a DEFAULT VALUES RETURNING n"},
    {"then_fail", "SELECT 1 / 0"},
};
#define NSTMTS (sizeof stmts / sizeof stmts[0])

static tdb *t;

static gw_err batch(db_conn *db, const char *name, const char *json, int n, bool *at_commit)
{
    PGresult *res = NULL;
    gw_err err;

    *at_commit = false;
    err = db_batch_commit(db, name, json, n, &res, at_commit);
    CHECK((err == GW_OK) == (res != NULL));
    if (res != NULL)
        CHECK_INT(PQntuples(res), n);
    PQclear(res);
    return err;
}

/* ---- a proxy that ends the session after the first COMMIT's answer ---------------------- */

typedef struct {
    int listen_fd, server_port;
} cut_proxy;

static bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* One connection: client bytes pass as they are; the server's are passed message by message
 * (a type byte and a length), and when @cut_after_commit, until a CommandComplete "COMMIT",
 * after which both ends close. */
static void proxy_one(int listen_fd, int server_port, bool cut_after_commit)
{
    int c = accept(listen_fd, NULL, NULL), sv = tsock_connect(server_port);
    static char buf[1 << 16];
    size_t have = 0;
    bool cut = false;

    while (c >= 0 && sv >= 0 && !cut) {
        struct pollfd p[2] = {{.fd = c, .events = POLLIN}, {.fd = sv, .events = POLLIN}};
        char tmp[8192];
        ssize_t r;

        if (poll(p, 2, 10000) <= 0)
            break;
        if (p[0].revents) {
            if ((r = recv(c, tmp, sizeof tmp, 0)) <= 0 || !send_all(sv, tmp, (size_t)r))
                break;
        }
        if (p[1].revents) {
            if ((r = recv(sv, buf + have, sizeof buf - have, 0)) <= 0)
                break;
            have += (size_t)r;
            size_t off = 0;
            while (!cut && have - off >= 5) {
                uint32_t len;

                memcpy(&len, buf + off + 1, 4);
                len = ntohl(len);
                if (have - off < 1 + (size_t)len)
                    break;
                cut = cut_after_commit && buf[off] == 'C' && len == 4 + 7 &&
                      memcmp(buf + off + 5, "COMMIT", 7) == 0;
                off += 1 + len;
            }
            if (!send_all(c, buf, off))
                break;
            memmove(buf, buf + off, have - off);
            have -= off;
        }
    }
    if (c >= 0)
        close(c);
    if (sv >= 0)
        close(sv);
}

/* The first session is cut after its first COMMIT's answer; the reconnect passes whole. */
static void *cut_proxy_run(void *arg)
{
    cut_proxy *px = arg;

    proxy_one(px->listen_fd, px->server_port, true);
    proxy_one(px->listen_fd, px->server_port, false);
    return NULL;
}

/* A batch whose COMMIT answered, then the session ended before the Sync's answer. */
static void commit_then_cut(void)
{
    PGconn *pg = PQconnectdb(tdb_url(t));
    int port = 0;
    cut_proxy px = {.listen_fd = tsock_listen(1, &port)};
    pthread_t th;
    db_conn *db = NULL;
    bool at_commit;
    char url[512];

    if (!CHECK(PQstatus(pg) == CONNECTION_OK) || !CHECK(px.listen_fd >= 0)) {
        PQfinish(pg);
        if (px.listen_fd >= 0)
            close(px.listen_fd);
        return;
    }
    px.server_port = atoi(PQport(pg));
    /* plain messages from the first byte: no SSL or GSS negotiation to pass through */
    snprintf(url, sizeof url,
             "host=127.0.0.1 port=%d dbname=%s user=%s sslmode=disable gssencmode=disable", port,
             PQdb(pg), PQuser(pg));
    PQfinish(pg);
    if (!CHECK(pthread_create(&th, NULL, cut_proxy_run, &px) == 0))
        return;
    if (CHECK(db_open(url, "test_db_batch_commit_cut", stmts, NSTMTS, false, &db) == GW_OK)) {
        CHECK(batch(db, "put", "[9]", 1, &at_commit) == GW_OK);
        CHECK_INT(tdb_long(t, "SELECT count(*) FROM t WHERE k = 9", NULL), 1);
        /* the cut session is not used again: the next batch runs on a new one */
        CHECK(batch(db, "put", "[10]", 1, &at_commit) == GW_OK);
        CHECK_INT(tdb_long(t, "SELECT count(*) FROM t WHERE k = 10", NULL), 1);
    }
    db_close(db);                      /* ends the second session the proxy passes */
    shutdown(px.listen_fd, SHUT_RDWR); /* wakes an accept() still waiting */
    pthread_join(th, NULL);
    close(px.listen_fd);
}

/* db_batch_commit_then(): the batch's result, and *@then_ok. */
static gw_err batch_then(db_conn *db, const char *name, const char *json, int n, const char *then,
                         bool *at_commit, bool *then_ok)
{
    PGresult *res = NULL;
    gw_err err;

    *at_commit = *then_ok = false;
    err = db_batch_commit_then(db, name, json, n, then, &res, at_commit, then_ok);
    CHECK((err == GW_OK) == (res != NULL));
    PQclear(res);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);
    return err;
}

static long long rows_in(const char *table)
{
    char sql[64];

    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    return tdb_long(t, sql, NULL);
}

static void run(void)
{
    db_conn *db = NULL;
    bool at_commit, then_ok;

    if (!CHECK(tdb_exec(t, "CREATE TABLE t (k int PRIMARY KEY)", NULL)) ||
        !CHECK(tdb_exec(t, "CREATE TABLE a (n serial PRIMARY KEY)", NULL)) ||
        !CHECK(tdb_exec(t, "CREATE TABLE p (k int PRIMARY KEY)", NULL)) ||
        !CHECK(tdb_exec(t, "CREATE TABLE d (k int REFERENCES p (k) DEFERRABLE INITIALLY DEFERRED)",
                        NULL)) ||
        !CHECK(tdb_exec(t, "CREATE SEQUENCE ran", NULL)) ||
        !CHECK(db_open(tdb_url(t), "test_db_batch_commit", stmts, NSTMTS, false, &db) == GW_OK))
        goto out;

    /* committed when it returns, seen by another session at once, nothing left open */
    CHECK(batch(db, "put", "[1, 2, 3]", 3, &at_commit) == GW_OK);
    CHECK(at_commit);
    CHECK_INT(rows_in("t"), 3);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);

    /* the function failed: nothing committed, rolled back, and the caller may run it again
     * (the batches split into single items after this) */
    CHECK(batch(db, "put", "[4, 1]", 2, &at_commit) == GW_ERR_CONFLICT);
    CHECK(!at_commit);
    CHECK_INT(rows_in("t"), 3);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);
    CHECK(batch(db, "put", "[4]", 1, &at_commit) == GW_OK);
    CHECK_INT(rows_in("t"), 4);

    /* the COMMIT failed: an unknown outcome to the caller (here: nothing committed) */
    CHECK(batch(db, "late", "[7]", 1, &at_commit) != GW_OK);
    CHECK(at_commit);
    CHECK_INT(rows_in("d"), 0);
    CHECK(PQtransactionStatus(db_pg(db)) == PQTRANS_IDLE);

    /* committed, but the answer does not fit the batch: a failure, and never "nothing ran" */
    CHECK(batch(db, "extra", "[5]", 1, &at_commit) == GW_ERR_DB);
    CHECK(at_commit);
    CHECK_INT(tdb_long(t, "SELECT count(*) FROM t WHERE k = 5", NULL), 1);

    /* a session that died while idle: reconnected once, the statements prepared again */
    CHECK(tdb_exec(t,
                   "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                   "WHERE application_name = 'test_db_batch_commit'",
                   NULL));
    CHECK(batch(db, "put", "[6]", 1, &at_commit) == GW_OK);
    CHECK_INT(rows_in("t"), 6);

    /* a batch that ran and then lost its session: unknown, and run once only */
    CHECK(batch(db, "cut", "[0]", 1, &at_commit) != GW_OK);
    CHECK(at_commit);
    CHECK_INT(tdb_long(t, "SELECT last_value FROM ran", NULL), 1);
    CHECK(batch(db, "put", "[8]", 1, &at_commit) == GW_OK);
    CHECK_INT(rows_in("t"), 7);

    commit_then_cut();
    CHECK_INT(rows_in("t"), 9);

    /* after a batch that committed: run and committed (another session sees its row) */
    CHECK(batch_then(db, "put", "[11]", 1, "then_put", &at_commit, &then_ok) == GW_OK);
    CHECK(then_ok);
    CHECK_INT(rows_in("a"), 1);
    /* after a batch that committed nothing, or whose COMMIT failed: skipped */
    CHECK(batch_then(db, "put", "[12, 11]", 2, "then_put", &at_commit, &then_ok) ==
          GW_ERR_CONFLICT);
    CHECK(!at_commit && !then_ok);
    CHECK(batch_then(db, "late", "[13]", 1, "then_put", &at_commit, &then_ok) != GW_OK);
    CHECK(at_commit && !then_ok);
    CHECK_INT(rows_in("a"), 1);
    /* its own failure: the batch committed all the same, and the session goes on */
    CHECK(batch_then(db, "put", "[14]", 1, "then_fail", &at_commit, &then_ok) == GW_OK);
    CHECK(!then_ok);
    CHECK_INT(tdb_long(t, "SELECT count(*) FROM t WHERE k = 14", NULL), 1);
    CHECK(batch(db, "put", "[15]", 1, &at_commit) == GW_OK);
    CHECK_INT(rows_in("t"), 12);
out:
    db_close(db);
}

int main(void)
{
    return tdb_main("test_db_batch_commit", false, &t, run);
}
