/*
 * tests/banksim/test_banksim.c - payments-banksim: once per key, the rules, the faults, the store
 *
 * Starts the simulator on 127.0.0.1:0 with a fresh BANKSIM_STORE and checks
 * the HTTP contract of section 12: a key executes once and is answered again
 * with its stored result, the list pages in execution order, the rules of
 * section 5 and the faults refuse or lose answers as documented, BANK_TOKEN
 * guards /v1, and a restart on the same store remembers every transfer.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"
#include "tests/support/tproc.h"

#define START_MS 10000
#define STOP_MS  10000
#define TOKEN    "banksim-test-token-0123456789"

#define RULES  "001/*:fail-first=2;002/666:permanent"
#define FAULTS "003/*:drop-after-execute;004/*:late=300;005/*:5xx-first=1"

static const char *bin;
static char store_path[512];
static tproc *sim;
static char base[64];

/* Start the simulator; @token NULL: no BANK_TOKEN; @with_store false: memory only. */
static bool start(const char *token, bool with_store, const char *label)
{
    char store_env[600], token_env[128];
    const char *env[] = {
        "BANKSIM_LISTEN=127.0.0.1:0",
        "BANK_SIM_RULES=" RULES,
        "BANK_SIM_FAULTS=" FAULTS,
        "LOG_LEVEL=info",
        "LOG_FORMAT=text",
        store_env,
        token_env,
        NULL,
    };
    int port;

    snprintf(store_env, sizeof store_env, with_store ? "BANKSIM_STORE=%s" : "BANKSIM_STORE",
             store_path);
    snprintf(token_env, sizeof token_env, token ? "BANK_TOKEN=%s" : "BANK_TOKEN", token);
    sim = tproc_start(bin, env, label);
    if (!CHECK(sim != NULL))
        return false;
    port = tproc_wait_listening(sim, START_MS);
    if (!CHECK(port > 0))
        return false;
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    return true;
}

static void stop(void)
{
    CHECK_INT(tproc_stop(sim, STOP_MS), 0);
    tproc_free(sim);
    sim = NULL;
}

/* POST a transfer @key to @bank/@account; @token NULL: no Authorization. */
static bool post(const char *key, const char *bank, const char *account, long long amount,
                 const char *token, thttp_resp *out)
{
    char body[512], idem[128], auth[128];
    const char *headers[] = {"Content-Type: application/json", idem, token ? auth : NULL, NULL};
    thttp_req req = {0};
    char url[128];

    snprintf(body, sizeof body,
             "{\"transfer_id\":\"%s\",\"payment_id\":\"pay-%s\",\"method\":\"pix\","
             "\"amount_cents\":%lld,\"currency\":\"BRL\",\"payee\":{\"bank\":\"%s\","
             "\"account\":\"%s\"}}",
             key, key, amount, bank, account);
    snprintf(idem, sizeof idem, "Idempotency-Key: %s", key);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token ? token : "");
    snprintf(url, sizeof url, "%s/v1/transfers", base);
    req.method = "POST";
    req.url = url;
    req.headers = headers;
    req.body = body;
    req.len = strlen(body);
    return thttp_do(&req, out);
}

/* The bank_reference of executed transfer @key by GET, copied into @ref ("" when not 200). */
static long get_ref(const char *key, char *ref, size_t len)
{
    thttp_resp r = {0};
    char path[128];
    long status;

    snprintf(path, sizeof path, "/v1/transfers/%s", key);
    thttp_get(base, path, NULL, &r);
    status = r.status;
    snprintf(ref, len, "%s",
             status == 200 && thttp_json_str(&r, "bank_reference")
                 ? thttp_json_str(&r, "bank_reference")
                 : "");
    if (status == 200)
        CHECK_STR(thttp_json_str(&r, "status"), "executed");
    thttp_resp_free(&r);
    return status;
}

/* Every transfer_id of the list, paging with @limit, joined by ','; the pages seen. */
static int list_all(int limit, char *out, size_t len)
{
    char after[32] = "", path[128];
    int pages = 0;

    out[0] = '\0';
    for (;;) {
        thttp_resp r = {0};
        json_t *items, *next, *it;
        size_t i;

        snprintf(path, sizeof path, "/v1/transfers?status=executed&limit=%d%s%s", limit,
                 after[0] ? "&after=" : "", after);
        thttp_get(base, path, NULL, &r);
        pages++;
        if (!CHECK_INT(r.status, 200) || !CHECK(r.json != NULL)) {
            thttp_resp_free(&r);
            return -1;
        }
        items = json_object_get(r.json, "items");
        next = json_object_get(r.json, "next");
        CHECK(json_is_array(items));
        CHECK(json_array_size(items) <= (size_t)limit);
        json_array_foreach(items, i, it)
        {
            size_t used = strlen(out);
            snprintf(out + used, len - used, "%s%s", used ? "," : "",
                     json_string_value(json_object_get(it, "transfer_id")));
        }
        if (json_is_null(next) || !CHECK(json_is_string(next)) || pages > 100) {
            thttp_resp_free(&r);
            return pages;
        }
        snprintf(after, sizeof after, "%s", json_string_value(next));
        thttp_resp_free(&r);
    }
}

static void test_once_per_key(void)
{
    thttp_resp r1 = {0}, r2 = {0};
    char ref[64];

    post("t-1", "000", "1", 1250, NULL, &r1);
    post("t-1", "000", "1", 1250, NULL, &r2);
    CHECK_INT(r1.status, 201);
    CHECK_INT(r2.status, 200);
    CHECK_STR(thttp_json_str(&r1, "status"), "executed");
    CHECK_STR(thttp_json_str(&r1, "payment_id"), "pay-t-1");
    CHECK_CONTAINS(thttp_json_str(&r1, "bank_reference"), "BSIM-");
    CHECK_STR(thttp_json_str(&r2, "bank_reference"), thttp_json_str(&r1, "bank_reference"));
    CHECK_INT(get_ref("t-1", ref, sizeof ref), 200);
    CHECK_STR(ref, thttp_json_str(&r1, "bank_reference"));
    CHECK_INT(get_ref("never-sent", ref, sizeof ref), 404);
    CHECK_INT(tproc_log_count(sim, "event=transfer_executed transfer_id=t-1 "), 1);
    thttp_resp_free(&r1);
    thttp_resp_free(&r2);
}

static void test_list_paging(void)
{
    thttp_resp r = {0};
    char ids[1024];

    post("t-2", "000", "1", 100, NULL, &r);
    CHECK_INT(r.status, 201);
    thttp_resp_free(&r);
    post("t-3", "000", "1", 100, NULL, &r);
    CHECK_INT(r.status, 201);
    thttp_resp_free(&r);
    CHECK_INT(list_all(1, ids, sizeof ids), 3);
    CHECK_STR(ids, "t-1,t-2,t-3");
    thttp_get(base, "/v1/transfers?limit=0", NULL, &r);
    CHECK_INT(r.status, 400);
    thttp_resp_free(&r);
}

static void test_rules(void)
{
    static const long want[] = {503, 503, 201, 200};
    thttp_resp r = {0};

    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        tcheck_context("fail-first call %zu", i + 1);
        post("t-ff", "001", "7", 100, NULL, &r);
        CHECK_INT(r.status, want[i]);
        if (want[i] == 503)
            CHECK_STR(thttp_json_str(&r, "code"), "bank_unavailable");
        thttp_resp_free(&r);
    }
    tcheck_context_clear();
    post("t-perm", "002", "666", 100, NULL, &r);
    CHECK_INT(r.status, 422);
    CHECK_STR(thttp_json_str(&r, "code"), "account_blocked");
    CHECK(thttp_json_str(&r, "detail") != NULL);
    thttp_resp_free(&r);
    post("t-zero", "000", "1", 0, NULL, &r);
    CHECK_INT(r.status, 422);
    CHECK_STR(thttp_json_str(&r, "code"), "invalid_amount");
    thttp_resp_free(&r);
    CHECK_INT(tproc_log_count(sim, "event=transfer_executed transfer_id=t-ff "), 1);
}

static void test_key_mismatch(void)
{
    const char *headers[] = {"Content-Type: application/json", "Idempotency-Key: other", NULL};
    const char *body = "{\"transfer_id\":\"t-mm\",\"payment_id\":\"p\",\"method\":\"pix\","
                       "\"amount_cents\":1,\"currency\":\"BRL\",\"payee\":{\"bank\":\"000\","
                       "\"account\":\"1\"}}";
    char url[128];
    thttp_resp r = {0};

    snprintf(url, sizeof url, "%s/v1/transfers", base);
    thttp_request("POST", url, headers, body, strlen(body), &r);
    CHECK_INT(r.status, 422);
    CHECK_STR(thttp_json_str(&r, "code"), "key_mismatch");
    thttp_resp_free(&r);
}

static void test_faults(void)
{
    thttp_resp r = {0};
    long long t0;
    char ref[64];

    /* drop-after-execute: no HTTP answer at all, yet the bank says executed */
    post("t-drop", "003", "1", 100, NULL, &r);
    CHECK_INT(r.status, 0);
    CHECK(r.curl_code != CURLE_OK);
    thttp_resp_free(&r);
    CHECK_INT(get_ref("t-drop", ref, sizeof ref), 200);
    post("t-drop", "003", "1", 100, NULL, &r); /* every answer to this account is lost */
    CHECK_INT(r.status, 0);
    thttp_resp_free(&r);
    CHECK_INT(tproc_log_count(sim, "event=transfer_executed transfer_id=t-drop "), 1);

    t0 = tproc_now_ms();
    post("t-late", "004", "1", 100, NULL, &r);
    CHECK_INT(r.status, 201);
    CHECK(tproc_now_ms() - t0 >= 300);
    thttp_resp_free(&r);

    post("t-5xx", "005", "1", 100, NULL, &r);
    CHECK_INT(r.status, 500);
    thttp_resp_free(&r);
    CHECK_INT(get_ref("t-5xx", ref, sizeof ref), 404); /* a 500 before anything happened */
    post("t-5xx", "005", "1", 100, NULL, &r);
    CHECK_INT(r.status, 201);
    thttp_resp_free(&r);
}

/*
 * Rounds of BURST transfers over BURST kept-alive connections, all waiting when the
 * simulator looks (it is stopped while they are sent, as a busy machine would have it): every
 * one is answered. libmicrohttpd's epoll loop (0.9.75, and its master of 2025) waits again,
 * with its full timeout, after an epoll_wait() that returned exactly its 128 events: such a
 * burst sat unread until another socket spoke (in the worker: its own timeout, 2 s later).
 * banksim/server.c runs the poll loop.
 */
#define BURST        128
#define BURST_ROUNDS 4

static size_t discard(char *data, size_t size, size_t n, void *user)
{
    (void)data;
    (void)user;
    return size * n;
}

static void test_bursts_of_128(void)
{
    CURLM *multi = curl_multi_init();
    CURL *easy[BURST];
    struct curl_slist *hdr[BURST];
    char body[BURST][256], url[128];
    int stuck = 0, answered = 0;

    snprintf(url, sizeof url, "%s/v1/transfers", base);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)(2 * BURST));
    for (int i = 0; i < BURST; i++) {
        easy[i] = curl_easy_init();
        hdr[i] = NULL;
    }
    for (int round = 0; round < BURST_ROUNDS; round++) {
        int running = 1;
        CURLMsg *msg;
        int left;

        if (round > 0)
            tproc_signal(sim, SIGSTOP); /* the first round opens the connections */
        for (int i = 0; i < BURST; i++) {
            char key[64], idem[96];

            snprintf(key, sizeof key, "burst-%d-%d", round, i);
            snprintf(idem, sizeof idem, "Idempotency-Key: %s", key);
            snprintf(body[i], sizeof body[i],
                     "{\"transfer_id\":\"%s\",\"payment_id\":\"pay-%s\",\"method\":\"pix\","
                     "\"amount_cents\":100,\"currency\":\"BRL\",\"payee\":{\"bank\":\"000\","
                     "\"account\":\"9\"}}",
                     key, key);
            curl_slist_free_all(hdr[i]);
            hdr[i] = curl_slist_append(NULL, "Content-Type: application/json");
            hdr[i] = curl_slist_append(hdr[i], "Expect:");
            hdr[i] = curl_slist_append(hdr[i], idem);
            curl_easy_setopt(easy[i], CURLOPT_URL, url);
            curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, hdr[i]);
            curl_easy_setopt(easy[i], CURLOPT_POSTFIELDS, body[i]);
            curl_easy_setopt(easy[i], CURLOPT_TIMEOUT_MS, 5000L);
            curl_easy_setopt(easy[i], CURLOPT_NOSIGNAL, 1L);
            curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, discard);
            curl_multi_add_handle(multi, easy[i]);
        }
        for (int k = 0; round > 0 && k < 20; k++) { /* the requests go out */
            curl_multi_perform(multi, &running);
            curl_multi_poll(multi, NULL, 0, 5, NULL);
        }
        if (round > 0)
            tproc_signal(sim, SIGCONT);
        while (running > 0) {
            curl_multi_perform(multi, &running);
            if (running > 0)
                curl_multi_poll(multi, NULL, 0, 100, NULL);
        }
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            long status = 0;

            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
            stuck += msg->data.result == CURLE_OPERATION_TIMEDOUT;
            answered += msg->data.result == CURLE_OK && status == 201;
        }
        for (int i = 0; i < BURST; i++)
            curl_multi_remove_handle(multi, easy[i]);
    }
    CHECK_INT(stuck, 0);
    CHECK_INT(answered, BURST * BURST_ROUNDS); /* any other failure, or a transfer never ended */
    for (int i = 0; i < BURST; i++) {
        curl_easy_cleanup(easy[i]);
        curl_slist_free_all(hdr[i]);
    }
    curl_multi_cleanup(multi);
}

static void test_restart_remembers(void)
{
    char before[4096], after[4096], ref1[64], ref2[64];
    thttp_resp r = {0};

    CHECK(list_all(1000, before, sizeof before) == 1);
    CHECK_INT(get_ref("t-1", ref1, sizeof ref1), 200);
    stop();
    if (!start(NULL, true, "banksim-restarted"))
        return;
    CHECK(tproc_log_contains(sim, "event=store_loaded"));
    CHECK(list_all(1000, after, sizeof after) == 1);
    CHECK_STR(after, before);
    CHECK_INT(get_ref("t-1", ref2, sizeof ref2), 200);
    CHECK_STR(ref2, ref1);
    post("t-1", "000", "1", 1250, NULL, &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(thttp_json_str(&r, "bank_reference"), ref1);
    thttp_resp_free(&r);
    CHECK_INT(tproc_log_count(sim, "event=transfer_executed"), 0);
}

static void test_token_required(void)
{
    thttp_resp r = {0};
    char *log;

    if (!start(TOKEN, false, "banksim-token"))
        return;
    post("t-auth", "000", "1", 100, NULL, &r);
    CHECK_INT(r.status, 401);
    thttp_resp_free(&r);
    post("t-auth", "000", "1", 100, "wrong-token", &r);
    CHECK_INT(r.status, 401);
    thttp_resp_free(&r);
    thttp_get(base, "/v1/transfers", NULL, &r);
    CHECK_INT(r.status, 401);
    thttp_resp_free(&r);
    post("t-auth", "000", "1", 100, TOKEN, &r);
    CHECK_INT(r.status, 201);
    thttp_resp_free(&r);
    thttp_get(base, "/v1/transfers/t-auth", TOKEN, &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    thttp_get(base, "/healthz", NULL, &r);
    CHECK_INT(r.status, 200);
    thttp_resp_free(&r);
    log = tproc_log(sim);
    CHECK_NOT_CONTAINS(log, TOKEN);
    free(log);
    stop();
}

int main(void)
{
    bin = getenv("GW_BANKSIM_BIN");
    if (bin == NULL || *bin == '\0') {
        fprintf(stderr, "GW_BANKSIM_BIN is not set\n");
        return 1;
    }
    thttp_global_init();
    snprintf(store_path, sizeof store_path, "%s/banksim-store-%d.jsonl", tproc_tmpdir(),
             (int)getpid());
    unlink(store_path);
    if (start(NULL, true, "banksim")) {
        TRUN(test_once_per_key);
        TRUN(test_list_paging);
        TRUN(test_rules);
        TRUN(test_key_mismatch);
        TRUN(test_faults);
        TRUN(test_restart_remembers);
        if (sim != NULL)
            stop();
    }
    TRUN(test_token_required);
    if (start(NULL, false, "banksim-burst")) {
        TRUN(test_bursts_of_128);
        stop();
    }
    unlink(store_path);
    thttp_global_cleanup();
    return tcheck_summary("banksim");
}
