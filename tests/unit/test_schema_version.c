/* tests/unit/test_schema_version.c - DB_SCHEMA_VERSION is the newest sql/NNNN_*.sql */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/pg/db.h"
#include "tests/support/tcheck.h"

int main(int argc, char **argv)
{
    DIR *d;
    struct dirent *e;
    long highest = 0;
    int files = 0;

    if (!CHECK_INT(argc, 2)) {
        fprintf(stderr, "usage: %s SQL_DIR\n", argv[0]);
        return 1;
    }
    d = opendir(argv[1]);
    if (!CHECK(d != NULL))
        return tcheck_summary("test_schema_version");
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen(name), digits = strspn(name, "0123456789");
        long v;

        if (len < 5 || strcmp(name + len - 4, ".sql") != 0)
            continue;
        tcheck_context("%s", name);
        /* scripts/migrate's rule: NNNN_name.sql, the number before the first '_' */
        if (!CHECK(digits > 0 && name[digits] == '_'))
            continue;
        v = strtol(name, NULL, 10);
        CHECK(v > 0);
        files++;
        if (v > highest)
            highest = v;
    }
    closedir(d);
    tcheck_context_clear();
    CHECK(files > 0);
    CHECK_INT(highest, DB_SCHEMA_VERSION);
    return tcheck_summary("test_schema_version");
}
