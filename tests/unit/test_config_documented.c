/* tests/unit/test_config_documented.c - every variable shared/config.c reads is in docs/ */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tcheck.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        buf[fread(buf, 1, (size_t)n, f)] = '\0';
    }
    fclose(f);
    return buf;
}

/* The names passed to env_str(), env_int() and env_long(): the first string literal of each call.
 */
static void check_names(const char *config, const char *docs)
{
    static const char *const calls[] = {"env_str(\"", "env_int(errs, \"", "env_long(errs, \""};
    int found = 0;

    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        for (const char *p = strstr(config, calls[c]); p; p = strstr(p + 1, calls[c])) {
            const char *name = p + strlen(calls[c]);
            size_t len = strcspn(name, "\"");
            char var[64], cell[80];

            if (len == 0 || len >= sizeof var)
                continue;
            memcpy(var, name, len);
            var[len] = '\0';
            snprintf(cell, sizeof cell, "`%s`", var); /* as the configuration table spells it */
            tcheck_context("variable %s", var);
            CHECK(strstr(docs, cell) != NULL);
            found++;
        }
    }
    tcheck_context_clear();
    CHECK(found >= 15); /* the contract's variables at least: the scan itself works */
}

int main(int argc, char **argv)
{
    char path[4096];
    char *config, *docs;

    if (argc != 2) {
        fprintf(stderr, "usage: %s SOURCE_ROOT\n", argv[0]);
        return 2;
    }
    snprintf(path, sizeof path, "%s/shared/config.c", argv[1]);
    config = slurp(path);
    snprintf(path, sizeof path, "%s/docs/operations.md", argv[1]);
    docs = slurp(path);
    if (CHECK(config != NULL) && CHECK(docs != NULL))
        check_names(config, docs);
    free(config);
    free(docs);
    return tcheck_summary("config_documented");
}
