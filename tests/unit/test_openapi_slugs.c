/*
 * tests/unit/test_openapi_slugs.c - every problem type the API answers is documented
 *
 * openapi/payments.yaml: each slug is documented in openapi/. This reads the
 * first string literal of every problem_reply(...) and problem_new(...) call in
 * each .c of api/, api/admin/ and api/console/ (scan_dirs) and looks for
 * "problems/<slug>" in openapi/payments.yaml.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tcheck.h"

/* The folders whose .c files answer problems, under the source root. */
static const char *const scan_dirs[] = {"api", "api/admin", "api/console"};

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long len;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)len + 1);
    if (buf != NULL && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (buf != NULL)
        buf[len] = '\0';
    fclose(f);
    return buf;
}

/* Check the slug of each @call( in @src against @spec; returns how many were seen. */
static int check_calls(const char *file, const char *src, const char *call, const char *spec)
{
    int seen = 0;

    for (const char *p = strstr(src, call); p != NULL; p = strstr(p + 1, call)) {
        const char *q = strchr(p, '"'), *end = strpbrk(p, ";{");
        char slug[80], needle[100];
        size_t n;

        if (q == NULL || (end != NULL && end < q))
            continue; /* a declaration, or a slug passed in a variable */
        n = strspn(q + 1, "abcdefghijklmnopqrstuvwxyz-");
        if (q[1 + n] != '"' || n == 0 || n >= sizeof slug)
            continue; /* not a slug (a format string, a title) */
        memcpy(slug, q + 1, n);
        slug[n] = '\0';
        snprintf(needle, sizeof needle, "problems/%s", slug);
        tcheck_context("%s: %s", file, slug);
        CHECK_CONTAINS(strstr(spec, needle) ? needle : NULL, needle);
        tcheck_context_clear();
        seen++;
    }
    return seen;
}

/* Check every .c file of @dir (under @root) against @spec; returns how many calls were seen. */
static int scan_dir(const char *root, const char *dir, const char *spec)
{
    char path[1024], name[512];
    DIR *d;
    struct dirent *e;
    int seen = 0;

    snprintf(path, sizeof path, "%s/%s", root, dir);
    d = opendir(path);
    if (!CHECK(d != NULL)) {
        fprintf(stderr, "cannot open %s\n", path);
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        char *src;

        if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s/%s", root, dir, e->d_name);
        snprintf(name, sizeof name, "%s/%s", dir, e->d_name);
        src = read_all(path);
        if (!CHECK(src != NULL))
            continue;
        seen += check_calls(name, src, "problem_reply(", spec);
        seen += check_calls(name, src, "problem_new(", spec);
        free(src);
    }
    closedir(d);
    return seen;
}

int main(int argc, char **argv)
{
    char path[1024];
    char *spec;
    int seen = 0;

    if (!CHECK_INT(argc, 2))
        return 1;
    snprintf(path, sizeof path, "%s/openapi/payments.yaml", argv[1]);
    spec = read_all(path);
    if (!CHECK(spec != NULL)) {
        fprintf(stderr, "cannot read %s\n", path);
        return tcheck_summary("test_openapi_slugs");
    }
    for (size_t i = 0; i < sizeof scan_dirs / sizeof scan_dirs[0]; i++)
        seen += scan_dir(argv[1], scan_dirs[i], spec);
    printf("%d problem answers checked\n", seen);
    CHECK(seen >= 30); /* the scan found the calls at all (problem.c names the shared ones) */
    free(spec);
    return tcheck_summary("test_openapi_slugs");
}
