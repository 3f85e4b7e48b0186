/*
 * tests/integration/test_migrate_checksum.c - scripts/migrate refuses a migration that changed
 * after it was applied
 *
 * A copy of sql/ in a temporary folder (MIGRATIONS_DIR) is applied to a fresh database,
 * all but its newest file. Every applied row then carries the file's sha256; a database from
 * before checksums (no column) gets them on its next run. After an applied copy is edited and
 * the newest file added, migrate exits non-zero naming the edited file and applies nothing.
 * With the file restored it applies the newest one.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/tcheck.h"
#include "tests/support/tdb.h"
#include "tests/support/tproc.h"

#define RUN_MS    60000
#define MAX_FILES 64

static tdb *db;
static char src_dir[512], dst_dir[512];
static char *files[MAX_FILES]; /* owned, the NNNN_name.sql of sql/, sorted */
static int nfiles;

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .sql files of @dir into files[], sorted (four-digit names sort as numbers). */
static bool list_sql(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL)
        return false;
    while ((e = readdir(d)) != NULL && nfiles < MAX_FILES) {
        size_t len = strlen(e->d_name);

        if (len > 4 && strcmp(e->d_name + len - 4, ".sql") == 0) {
            files[nfiles] = strdup(e->d_name);
            if (files[nfiles] == NULL)
                abort();
            nfiles++;
        }
    }
    closedir(d);
    qsort(files, (size_t)nfiles, sizeof files[0], by_name);
    return nfiles >= 2;
}

/* Copy @name from sql/ to the temporary folder, with @extra appended when not NULL. */
static bool copy_sql(const char *name, const char *extra)
{
    char from[1024], to[1024], buf[8192];
    FILE *in, *out;
    size_t n;
    bool ok = true;

    snprintf(from, sizeof from, "%s/%s", src_dir, name);
    snprintf(to, sizeof to, "%s/%s", dst_dir, name);
    in = fopen(from, "rb");
    out = fopen(to, "wb");
    if (in == NULL || out == NULL) {
        if (in != NULL)
            fclose(in);
        if (out != NULL)
            fclose(out);
        return false;
    }
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = ok && fwrite(buf, 1, n, out) == n;
    if (extra != NULL)
        ok = ok && fputs(extra, out) >= 0;
    ok = !ferror(in) && ok;
    fclose(in);
    return fclose(out) == 0 && ok;
}

/* Run scripts/migrate on the test database with MIGRATIONS_DIR = the copy; status, stderr. */
static int migrate(char **err)
{
    const char *mig = getenv("GW_MIGRATE"), *root = getenv("GW_SOURCE_ROOT");
    char bin[600], url_env[600], dir_env[600];

    if (mig == NULL || *mig == '\0') {
        snprintf(bin, sizeof bin, "%s/scripts/migrate", root ? root : ".");
        mig = bin;
    }
    snprintf(url_env, sizeof url_env, "DATABASE_URL=%s", tdb_url(db));
    snprintf(dir_env, sizeof dir_env, "MIGRATIONS_DIR=%s", dst_dir);
    const char *const env[] = {url_env, dir_env, NULL};

    return tproc_run(mig, env, RUN_MS, err);
}

/* The version number of the file name @name (NNNN_...). */
static long version_of(const char *name)
{
    return strtol(name, NULL, 10);
}

static bool applied(long version)
{
    char v[32];

    snprintf(v, sizeof v, "%ld", version);
    return tdb_long(db, "SELECT count(*) FROM schema_migrations WHERE version = $1::int", v,
                    NULL) == 1;
}

static void test_checksums(void)
{
    const char *edited = files[nfiles - 2], *newest = files[nfiles - 1];
    char *err = NULL, *before = NULL, *after = NULL, v[32];

    /* 1. all but the newest: applied, each row with a sha256 */
    for (int i = 0; i < nfiles - 1; i++)
        if (!CHECK(copy_sql(files[i], NULL)))
            return;
    if (!CHECK_INT(migrate(&err), 0))
        fprintf(stderr, "%s", err ? err : "");
    free(err);
    err = NULL;
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM schema_migrations", NULL), nfiles - 1);
    CHECK_INT(tdb_long(db,
                       "SELECT count(*) FROM schema_migrations "
                       "WHERE checksum ~ '^[0-9a-f]{64}$'",
                       NULL),
              nfiles - 1);
    snprintf(v, sizeof v, "%ld", version_of(edited));
    before =
        tdb_value(db, "SELECT checksum FROM schema_migrations WHERE version = $1::int", v, NULL);
    CHECK(before != NULL);

    /* 2. a database migrated before checksums existed gets the files' checksums, once */
    CHECK(tdb_exec(db, "ALTER TABLE schema_migrations DROP COLUMN checksum", NULL));
    CHECK_INT(migrate(&err), 0);
    free(err);
    err = NULL;
    after =
        tdb_value(db, "SELECT checksum FROM schema_migrations WHERE version = $1::int", v, NULL);
    CHECK_STR(after, before);
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM schema_migrations WHERE checksum IS NULL", NULL),
              0);

    /* 3. an applied file changed: refused, naming it, and the newest file is not applied */
    CHECK(copy_sql(newest, NULL));
    CHECK(copy_sql(edited, "\n-- changed after it was applied\n"));
    CHECK(migrate(&err) != 0);
    CHECK_CONTAINS(err, edited);
    CHECK_CONTAINS(err, "changed after it was applied");
    CHECK(!applied(version_of(newest)));
    CHECK_INT(tdb_long(db, "SELECT count(*) FROM schema_migrations", NULL), nfiles - 1);
    free(err);
    err = NULL;

    /* 4. the file as it was: the newest one is applied */
    CHECK(copy_sql(edited, NULL));
    CHECK_INT(migrate(&err), 0);
    CHECK(applied(version_of(newest)));
    free(err);
    free(before);
    free(after);
}

static void remove_copy(void)
{
    char path[1024];

    for (int i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", dst_dir, files[i]);
        unlink(path);
        free(files[i]);
    }
    rmdir(dst_dir);
}

static void run(void)
{
    const char *root = getenv("GW_SOURCE_ROOT");

    snprintf(src_dir, sizeof src_dir, "%s/sql", root ? root : ".");
    snprintf(dst_dir, sizeof dst_dir, "%s/migrate_XXXXXX", tproc_tmpdir());
    if (!CHECK(list_sql(src_dir)) || !CHECK(mkdtemp(dst_dir) != NULL))
        return;
    TRUN(test_checksums);
    remove_copy();
}

int main(void)
{
    return tdb_main("test_migrate_checksum", false, &db, run);
}
