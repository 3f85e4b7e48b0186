/* tests/support/tdb.c - libpq for the tests: create, migrate, query, drop */
#include "tests/support/tdb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "tests/support/tcheck.h"
#include "tests/support/tproc.h"

#define MAX_PARAMS 8

struct tdb {
    char name[64];
    char *url;  /* owned */
    PGconn *pg; /* owned, to the test database; NULL until first used */
};

const char *tdb_admin_url(void)
{
    const char *u = getenv("GW_TEST_PG_URL");

    return (u != NULL && *u != '\0') ? u : NULL;
}

/*
 * The admin URL with its database replaced by @name. URLs keep their query
 * string; a keyword=value string gets "dbname=" appended (the last one wins).
 */
static char *url_with_db(const char *admin, const char *name)
{
    const char *scheme = strstr(admin, "://");
    size_t len = strlen(admin) + strlen(name) + 16;
    char *out = malloc(len);

    if (out == NULL)
        return NULL;
    if (scheme == NULL) {
        snprintf(out, len, "%s dbname=%s", admin, name);
        return out;
    }
    const char *auth = scheme + 3;
    const char *path = auth + strcspn(auth, "/?");
    const char *query = strchr(path, '?');

    snprintf(out, len, "%.*s/%s%s", (int)(path - admin), admin, name, query ? query : "");
    return out;
}

static PGconn *connect_to(const char *url)
{
    PGconn *pg = PQconnectdb(url);

    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "tdb: cannot connect: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    PQsetNoticeProcessor(pg, NULL, NULL); /* NOTICEs of DROP ... IF EXISTS are noise */
    return pg;
}

static bool admin_exec(const char *sql)
{
    PGconn *pg = connect_to(tdb_admin_url());
    PGresult *res;
    bool ok;

    if (pg == NULL)
        return false;
    res = PQexec(pg, sql);
    ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "tdb: %s: %s", sql, PQerrorMessage(pg));
    PQclear(res);
    PQfinish(pg);
    return ok;
}

static bool run_migrate(const char *url)
{
    const char *mig = getenv("GW_MIGRATE");
    char path[600];
    pid_t pid;
    int ws;

    if (mig == NULL || *mig == '\0') {
        const char *root = getenv("GW_SOURCE_ROOT");
        if (root == NULL || *root == '\0') {
            fprintf(stderr, "tdb: set GW_MIGRATE (the path of scripts/migrate)\n");
            return false;
        }
        snprintf(path, sizeof path, "%s/scripts/migrate", root);
        mig = path;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        dup2(2, 1); /* its "applied ..." lines go to the test's log */
        execl(mig, mig, url, (char *)NULL);
        fprintf(stderr, "tdb: exec %s failed\n", mig);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &ws, 0) != pid) {
        fprintf(stderr, "tdb: cannot run %s\n", mig);
        return false;
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "tdb: %s failed (status %d)\n", mig,
                WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
        return false;
    }
    return true;
}

tdb *tdb_create(bool migrate)
{
    char sql[128];
    tdb *db;
    unsigned r;
    FILE *f;

    if (tdb_admin_url() == NULL) {
        fprintf(stderr, "tdb: GW_TEST_PG_URL is not set\n");
        return NULL;
    }
    db = calloc(1, sizeof *db);
    if (db == NULL)
        return NULL;
    r = (unsigned)tproc_now_ms() ^ (unsigned)getpid() << 16;
    f = fopen("/dev/urandom", "rb");
    if (f != NULL) {
        if (fread(&r, sizeof r, 1, f) != 1)
            r ^= (unsigned)time(NULL);
        fclose(f);
    }
    snprintf(db->name, sizeof db->name, "t_%d_%08x", (int)getpid(), r);
    db->url = url_with_db(tdb_admin_url(), db->name);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db->name); /* [a-z0-9_]: no quoting needed */
    if (db->url == NULL || !admin_exec(sql)) {
        free(db->url);
        free(db);
        return NULL;
    }
    fprintf(stderr, "tdb: created database %s\n", db->name);
    if (migrate && !run_migrate(db->url)) {
        tdb_drop(db);
        return NULL;
    }
    return db;
}

int tdb_main(const char *name, bool migrate, tdb **db, void (*run)(void))
{
    if (tdb_admin_url() == NULL) {
        printf("SKIP: GW_TEST_PG_URL is not set\n");
        return 77;
    }
    if (db == NULL) {
        run();
    } else if (CHECK((*db = tdb_create(migrate)) != NULL)) {
        run();
        tdb_drop(*db);
        *db = NULL;
    }
    return tcheck_summary(name);
}

const char *tdb_url(const tdb *db)
{
    return db->url;
}

const char *tdb_name(const tdb *db)
{
    return db->name;
}

/* Run @sql with the NULL-terminated text parameters of @ap; reconnects once when broken. */
static PGresult *query(tdb *db, const char *sql, va_list ap)
{
    const char *params[MAX_PARAMS];
    int n = 0;
    const char *p;
    PGresult *res = NULL;

    while ((p = va_arg(ap, const char *)) != NULL && n < MAX_PARAMS)
        params[n++] = p;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (db->pg == NULL || PQstatus(db->pg) != CONNECTION_OK) {
            PQfinish(db->pg);
            db->pg = connect_to(db->url);
            if (db->pg == NULL)
                return NULL;
        }
        res = PQexecParams(db->pg, sql, n, NULL, params, NULL, NULL, 0);
        if (PQstatus(db->pg) == CONNECTION_OK)
            break;
        PQclear(res); /* the connection died under us (a restarted server): once more */
        res = NULL;
    }
    if (res == NULL ||
        (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)) {
        fprintf(stderr, "tdb: %s: %s", sql, db->pg ? PQerrorMessage(db->pg) : "no connection\n");
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Row 0, column 0 of @sql as a new string; NULL when no row, SQL NULL or error. */
static char *first_value(tdb *db, const char *sql, va_list ap)
{
    PGresult *res = query(db, sql, ap);
    char *v = NULL;

    if (res != NULL && PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0)) {
        v = strdup(PQgetvalue(res, 0, 0));
        if (v == NULL)
            abort();
    }
    PQclear(res);
    return v;
}

char *tdb_value(tdb *db, const char *sql, ...)
{
    va_list ap;
    char *v;

    va_start(ap, sql);
    v = first_value(db, sql, ap);
    va_end(ap);
    return v;
}

long long tdb_long(tdb *db, const char *sql, ...)
{
    va_list ap;
    char *v;
    long long n;

    va_start(ap, sql);
    v = first_value(db, sql, ap);
    va_end(ap);
    n = v != NULL ? strtoll(v, NULL, 10) : -1;
    free(v);
    return n;
}

bool tdb_check_at(const char *file, int line, tdb *db, const char *sql, const char *want,
                  bool contains)
{
    char *v = tdb_value(db, sql, NULL);
    bool ok = contains ? tcheck_contains(file, line, sql, v, want, true)
                       : tcheck_str(file, line, sql, v, want);

    free(v);
    return ok;
}

long long tdb_rows(tdb *db, const char *sql, ...)
{
    va_list ap;
    PGresult *res;
    long long v = -1;

    va_start(ap, sql);
    res = query(db, sql, ap);
    va_end(ap);
    if (res != NULL)
        v = PQntuples(res);
    PQclear(res);
    return v;
}

bool tdb_exec(tdb *db, const char *sql, ...)
{
    va_list ap;
    PGresult *res;
    bool ok;

    va_start(ap, sql);
    res = query(db, sql, ap);
    va_end(ap);
    ok = res != NULL;
    PQclear(res);
    return ok;
}

void tdb_drop(tdb *db)
{
    char sql[160];
    PGconn *pg;

    if (db == NULL)
        return;
    PQfinish(db->pg);
    pg = connect_to(tdb_admin_url());
    if (pg != NULL) {
        PGresult *res;

        /* WITH (FORCE) ends the sessions a killed program may have left (PostgreSQL 13+) */
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s%s", db->name,
                 PQserverVersion(pg) >= 130000 ? " WITH (FORCE)" : "");
        res = PQexec(pg, sql);
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
            fprintf(stderr, "tdb: %s: %s", sql, PQerrorMessage(pg));
        PQclear(res);
        PQfinish(pg);
    }
    free(db->url);
    free(db);
}
