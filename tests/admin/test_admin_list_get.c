/*
 * tests/admin/test_admin_list_get.c - GET /admin/dlq (keyset pages) and GET /admin/dlq/{id}
 *
 * Five PIX payments of R$ 0 dead-letter and are drained. The list is newest
 * first (ids descending): limit=2 gives two and a next cursor, after=next the
 * next two, then the last one with next null; limit equal to the count ends
 * with next null too; without a limit all five. limit and after outside their
 * ranges are 422. GET /admin/dlq/{id} returns the letter exactly as the list
 * shows it; an unknown id, one that is not a number, and one past bigint are
 * 404. Both need the admin token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"

#define WAIT_MS 30000
#define LETTERS 5

static te2e t;
static tapi api;
static tprog relay, worker;
static json_t *all; /* the drained letters by id, descending */

static int by_id_desc(const void *a, const void *b)
{
    long long x = tadm_id(*(json_t *const *)a), y = tadm_id(*(json_t *const *)b);

    return x < y ? 1 : x > y ? -1 : 0;
}

static void make_letters(void)
{
    json_t *sorted[LETTERS];
    thttp_resp r;

    for (int i = 1; i <= LETTERS; i++) {
        char e[32], p[32];

        snprintf(e, sizeof e, "evt-list-%d", i);
        snprintf(p, sizeof p, "pay-list-%d", i);
        if (!tadm_accept(&api, e, p, "pix", "approved", 0, "001", "1234-5", NULL))
            return;
    }
    if (!CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, LETTERS, WAIT_MS), LETTERS))
        return;
    if (tadm_drain(&api, 100, &r) &&
        CHECK_INT(json_array_size(json_object_get(r.json, "messages")), LETTERS)) {
        for (int i = 0; i < LETTERS; i++)
            sorted[i] = json_array_get(json_object_get(r.json, "messages"), (size_t)i);
        qsort(sorted, LETTERS, sizeof sorted[0], by_id_desc);
        all = json_array();
        for (int i = 0; i < LETTERS; i++)
            json_array_append(all, sorted[i]);
    }
    thttp_resp_free(&r);
}

/* GET @path: 200, items with the ids of all[@from..@from+@n), next = @next (NULL: JSON null). */
static char *check_page(const char *path, int from, int n, bool has_next)
{
    thttp_resp r;
    json_t *items, *next;
    char *cursor = NULL;

    tadm_admin(&api, "GET", path, &r);
    tcheck_context("GET %s: %.600s", path, r.body);
    if (!CHECK_INT(r.status, 200) || !CHECK(json_is_object(r.json)))
        goto out;
    CHECK_STR(thttp_header(&r, "Content-Type"), "application/json");
    items = json_object_get(r.json, "items");
    next = json_object_get(r.json, "next");
    CHECK_INT(json_object_size(r.json), 2);
    if (!CHECK(json_is_array(items)))
        goto out;
    CHECK_INT(json_array_size(items), n);
    for (int i = 0; i < n && (size_t)i < json_array_size(items); i++) {
        json_t *got = json_array_get(items, (size_t)i),
               *want = json_array_get(all, (size_t)(from + i));

        CHECK_INT(tadm_id(got), tadm_id(want));
        /* the drain's answer and the list show the same letter */
        if (!CHECK(json_equal(got, want)))
            fprintf(stderr, "    list: %s\n", tadm_dump(got));
    }
    if (has_next) {
        /* the cursor continues after the last item of this page */
        if (CHECK(json_is_string(next)) && CHECK(json_array_size(items) > 0)) {
            char want[32];

            snprintf(want, sizeof want, "%lld",
                     tadm_id(json_array_get(items, json_array_size(items) - 1)));
            CHECK_STR(json_string_value(next), want);
            cursor = strdup(json_string_value(next));
        }
    } else {
        CHECK(json_is_null(next));
    }
out:
    tcheck_context_clear();
    thttp_resp_free(&r);
    return cursor;
}

static void pages(void)
{
    char path[96], *next;

    if (!CHECK(all != NULL))
        return;
    next = check_page("/admin/dlq?limit=2", 0, 2, true);
    if (!CHECK(next != NULL))
        return;
    snprintf(path, sizeof path, "/admin/dlq?limit=2&after=%s", next);
    free(next);
    next = check_page(path, 2, 2, true);
    if (!CHECK(next != NULL))
        return;
    snprintf(path, sizeof path, "/admin/dlq?limit=2&after=%s", next);
    free(next);
    next = check_page(path, 4, 1, false);
    free(next);

    /* the boundaries: exactly the count, one less, the default, past the oldest */
    free(check_page("/admin/dlq?limit=5", 0, 5, false));
    free(check_page("/admin/dlq?limit=1000", 0, 5, false));
    next = check_page("/admin/dlq?limit=4", 0, 4, true);
    if (next != NULL) {
        snprintf(path, sizeof path, "/admin/dlq?after=%s", next);
        free(check_page(path, 4, 1, false));
    }
    free(next);
    free(check_page("/admin/dlq", 0, 5, false));
    snprintf(path, sizeof path, "/admin/dlq?after=%lld", tadm_id(json_array_get(all, LETTERS - 1)));
    free(check_page(path, 0, 0, false));
}

static void bad_queries(void)
{
    static const char *const bad[][2] = {
        {"/admin/dlq?limit=0", "/limit"},   {"/admin/dlq?limit=1001", "/limit"},
        {"/admin/dlq?limit=abc", "/limit"}, {"/admin/dlq?limit=-2", "/limit"},
        {"/admin/dlq?limit=2.0", "/limit"}, {"/admin/dlq?after=0", "/after"},
        {"/admin/dlq?after=abc", "/after"}, {"/admin/dlq?after=-1", "/after"},
    };
    thttp_resp r;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tadm_admin(&api, "GET", bad[i][0], &r);
        tcheck_context("GET %s", bad[i][0]);
        if (CHECK_PROBLEM(&r, 422, "validation-failed"))
            CHECK_STR(json_string_value(json_object_get(
                          json_array_get(json_object_get(r.json, "errors"), 0), "pointer")),
                      bad[i][1]);
        thttp_resp_free(&r);
    }
    /* a cursor past bigint is no cursor of ours; the database is fine (not 503) */
    tadm_admin(&api, "GET", "/admin/dlq?after=99999999999999999999", &r);
    tcheck_context("GET /admin/dlq?after=99999999999999999999: %.300s", r.body);
    CHECK(r.status == 422 || r.status == 200);
    thttp_resp_free(&r);
    tcheck_context_clear();
}

static void get_one(void)
{
    static const char *const unknown[] = {"abc", "0", "-1", "1e3", "99999999999999999999", NULL};
    long long max_id = tadm_id(json_array_get(all, 0));
    char path[96];
    thttp_resp r;

    if (!CHECK(all != NULL))
        return;
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *want = json_array_get(all, i);

        snprintf(path, sizeof path, "/admin/dlq/%lld", tadm_id(want));
        tadm_admin(&api, "GET", path, &r);
        tcheck_context("GET %s: %.400s", path, r.body);
        if (CHECK_INT(r.status, 200)) {
            CHECK_STR(thttp_header(&r, "Content-Type"), "application/json");
            CHECK(json_equal(r.json, want));
        }
        thttp_resp_free(&r);
    }
    snprintf(path, sizeof path, "/admin/dlq/%lld", max_id + 1000);
    tadm_admin(&api, "GET", path, &r);
    tcheck_context("GET %s", path);
    CHECK_PROBLEM(&r, 404, "not-found");
    thttp_resp_free(&r);
    for (const char *const *u = unknown; *u != NULL; u++) {
        snprintf(path, sizeof path, "/admin/dlq/%s", *u);
        tadm_admin(&api, "GET", path, &r);
        tcheck_context("GET %s: %.300s", path, r.body);
        CHECK_PROBLEM(&r, 404, "not-found");
        thttp_resp_free(&r);
    }
    tcheck_context_clear();

    /* the admin token, and only it */
    snprintf(path, sizeof path, "/admin/dlq/%lld", max_id);
    CHECK_UNAUTHORIZED(&api, "GET", path, TAPI_TOKEN, true);
    CHECK_UNAUTHORIZED(&api, "GET", "/admin/dlq", NULL, true);
    tadm_admin(&api, "POST", path, &r);
    CHECK_PROBLEM(&r, 405, "method-not-allowed");
    CHECK_STR(thttp_header(&r, "Allow"), "GET");
    thttp_resp_free(&r);
    tadm_admin(&api, "HEAD", path, &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
}

static void tests(void)
{
    TRUN(make_letters);
    TRUN(pages);
    TRUN(bad_queries);
    TRUN(get_one);
}

int main(void)
{
    int rc = tadm_main("admin_list_get", &t, &relay, &worker, &api, NULL, tests);

    json_decref(all);
    return rc;
}
