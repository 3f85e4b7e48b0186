/* api/admin/bank_list.c - pages of the bank's executed transfers over libcurl */
#include "api/admin/bank_list.h"

#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "shared/lib/log.h"

#define PAGE       1000
#define ANSWER_MAX (4 * 1024 * 1024) /* a page of 1,000 transfers is far less */

typedef struct answer {
    char *buf;
    size_t len;
    bool too_big;
} answer;

static size_t on_data(char *ptr, size_t size, size_t n, void *arg)
{
    answer *a = arg;
    size_t got = size * n;
    char *grown;

    if (a->len + got > ANSWER_MAX) {
        a->too_big = true;
        return 0; /* libcurl stops the transfer */
    }
    if ((grown = realloc(a->buf, a->len + got + 1)) == NULL)
        return 0;
    a->buf = grown;
    memcpy(a->buf + a->len, ptr, got);
    a->len += got;
    a->buf[a->len] = '\0';
    return got;
}

/* One page: its items appended to @all; *@next the cursor of the next page, or NULL. */
static gw_err one_page(const gw_config *cfg, CURL *easy, const char *after, json_t *all,
                       char **next)
{
    char url[1024], auth[300];
    struct curl_slist *headers = NULL;
    answer a = {0};
    long status = 0;
    json_t *root = NULL, *items;
    CURLcode rc;
    gw_err err = GW_ERR_RETRY;

    *next = NULL;
    snprintf(url, sizeof url, "%s/v1/transfers?status=executed&limit=%d%s%s", cfg->bank_url, PAGE,
             after ? "&after=" : "", after ? after : "");
    if (cfg->bank_token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", cfg->bank_token);
        headers = curl_slist_append(headers, auth);
    }
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)cfg->bank_timeout_ms);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &a);
    rc = curl_easy_perform(easy);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && status == 200 && a.buf != NULL)
        root = json_loads(a.buf, 0, NULL);
    items = json_object_get(root, "items");
    if (json_is_array(items)) {
        json_t *nx = json_object_get(root, "next");
        size_t i;
        json_t *it;

        json_array_foreach(items, i, it)
        {
            const char *id = json_string_value(json_object_get(it, "transfer_id"));
            const char *ref = json_string_value(json_object_get(it, "bank_reference"));

            if (id != NULL)
                json_array_append_new(
                    all, json_pack("{s:s,s:s?}", "transfer_id", id, "bank_reference", ref));
        }
        if (json_is_string(nx) && json_array_size(items) > 0)
            *next = strdup(json_string_value(nx));
        err = json_is_null(nx) || *next != NULL ? GW_OK : GW_ERR_RETRY;
    }
    if (err != GW_OK)
        log_warn("bank_list_failed", "status=%ld curl=\"%s\"", status, curl_easy_strerror(rc));
    json_decref(root);
    curl_slist_free_all(headers);
    free(a.buf);
    return err;
}

gw_err bank_list_executed(const gw_config *cfg, long max_items, json_t **out)
{
    CURL *easy = curl_easy_init();
    json_t *all = json_array();
    char *after = NULL, *next = NULL;
    gw_err err = easy && all ? GW_OK : GW_ERR_NOMEM;

    while (err == GW_OK) {
        err = one_page(cfg, easy, after, all, &next);
        free(after);
        after = next;
        if (err != GW_OK || after == NULL)
            break;
        if ((long)json_array_size(all) > max_items)
            err = GW_ERR_INVALID;
    }
    free(after);
    curl_easy_cleanup(easy);
    if (err != GW_OK) {
        json_decref(all);
        return err;
    }
    *out = all;
    return GW_OK;
}
