/*
 * tests/console/test_console.c - the operator console (GET /admin/ui/) in a real browser
 *
 * The world of an admin test (tests/admin/tadmin.h): its own database and vhost, payments-relay,
 * payments-worker with bank 237 down, and payments-api. Dead letters are made the way operators
 * meet them:
 *   - ZERO payments of R$ 0 (a permanent failure: one group),
 *   - DOWN TED payments to bank 237, dead-lettered once their retries are exhausted (another),
 *   - one poison message published to payments.events with a body, a message id and headers that
 *     carry <script>, <img onerror=...> and the URL of a loopback listener of this test: the
 *     worker dead-letters it as invalid (a third group).
 * All are drained into PostgreSQL. Then `node tests/console/console.mjs` drives Debian's chromium
 * through playwright-core (installed with `npm ci` into tests/console/node_modules when missing)
 * over the three scenarios written at its top: the operator's path (log in, groups, search,
 * one letter, replay, a group job of ZERO letters, drain, reconciliation, log out), the poison
 * shown in every view without running, and the API's 401 and 403 answers. It fails when node
 * exits non-zero, and when anything connected to the poison's listener.
 * GW_CONSOLE_SCREENSHOTS=<folder> (from the environment) makes node save the main views there.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "tests/admin/tadmin.h"
#include "tests/support/tsock.h"

#define ZERO    200
#define DOWN    3
#define WAIT_MS 60000

static te2e t;
static tapi api;
static tprog relay, worker;
static int trap_fd = -1;
static char trap_url[64];

/* A loopback listener nobody may reach: the poison's payload points at it. */
static bool trap_open(void)
{
    int port;

    if ((trap_fd = tsock_listen(16, &port)) < 0)
        return false;
    snprintf(trap_url, sizeof trap_url, "http://127.0.0.1:%d/trap", port);
    return true;
}

/* trap_hit - a connection is waiting on the listener. */
static bool trap_hit(void)
{
    struct pollfd p = {.fd = trap_fd, .events = POLLIN};

    return poll(&p, 1, 0) > 0;
}

static amqp_table_entry_t str_entry(const char *key, const char *value)
{
    amqp_table_entry_t e;

    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_cstring_bytes(value);
    return e;
}

/*
 * publish_poison - the poison to payments.events (routing key payment.pix.approved), confirmed:
 * its body is JSON that breaks every rule, its message id (the letter's event id) and headers
 * hold markup. True when the broker confirmed it.
 */
static bool publish_poison(void)
{
    char body[1024], img[256], *url = strdup(t.amqp_url);
    struct amqp_connection_info info;
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    amqp_table_entry_t h[4];
    amqp_basic_properties_t props;
    amqp_frame_t f;
    struct timeval tv = {10, 0};
    bool ok = false;

    snprintf(img, sizeof img, "<img src=\"%s.png\" onerror=\"window.__paygw_pwned='img'\">",
             trap_url);
    snprintf(body, sizeof body,
             "{\"event_id\":\"poison-<script>window.__paygw_pwned='body'</script>\","
             "\"payment_id\":\"<img src=x onerror=\\\"window.__paygw_pwned='pid'\\\">\","
             "\"amount_cents\":\"<b>1</b>\",\"note\":\"<a href=\\\"%s\\\">%s</a>\","
             "\"frame\":\"<iframe src=\\\"%s\\\"></iframe>\"}",
             trap_url, trap_url, trap_url);
    h[0].key = amqp_cstring_bytes("x-attempt");
    h[0].value.kind = AMQP_FIELD_KIND_I32;
    h[0].value.value.i32 = 1;
    h[1] = str_entry("x-last-error", "<script>window.__paygw_pwned='header'</script>");
    h[2] = str_entry("x-poison", img);
    h[3] = str_entry("x-link", trap_url);
    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                   AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2;
    props.message_id =
        amqp_cstring_bytes("poison-<img src=x onerror=\"window.__paygw_pwned='mid'\">");
    props.headers.num_entries = 4;
    props.headers.entries = h;

    if (url == NULL || s == NULL || amqp_parse_url(url, &info) != AMQP_STATUS_OK ||
        amqp_socket_open_noblock(s, info.host, info.port, &tv) != AMQP_STATUS_OK)
        goto out;
    if (amqp_login(c, info.vhost, 0, 131072, 30, AMQP_SASL_METHOD_PLAIN, info.user, info.password)
                .reply_type != AMQP_RESPONSE_NORMAL ||
        amqp_channel_open(c, 1) == NULL || amqp_confirm_select(c, 1) == NULL)
        goto out;
    if (amqp_basic_publish(c, 1, amqp_cstring_bytes("payments.events"),
                           amqp_cstring_bytes("payment.pix.approved"), 0, 0, &props,
                           amqp_cstring_bytes(body)) != AMQP_STATUS_OK)
        goto out;
    amqp_maybe_release_buffers(c);
    if (amqp_simple_wait_frame_noblock(c, &f, &tv) == AMQP_STATUS_OK &&
        f.frame_type == AMQP_FRAME_METHOD && f.payload.method.id == AMQP_BASIC_ACK_METHOD)
        ok = true;
out:
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    free(url);
    return ok;
}

static bool make_letters(void)
{
    char ev[64], pay[64];
    thttp_resp r;
    long long drained = -1;

    for (int i = 1; i <= ZERO; i++) {
        snprintf(ev, sizeof ev, "evt-zero-%03d", i);
        snprintf(pay, sizeof pay, "pay-zero-%03d", i);
        if (!tadm_accept(&api, ev, pay, "pix", "approved", 0, "001", "1234-5", NULL))
            return false;
    }
    for (int i = 1; i <= DOWN; i++) {
        snprintf(ev, sizeof ev, "evt-down-%d", i);
        snprintf(pay, sizeof pay, "pay-down-%d", i);
        if (!tadm_accept(&api, ev, pay, "ted", "approved", 5000 + i, "237", "5555-0", NULL))
            return false;
    }
    if (!CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, ZERO + DOWN, WAIT_MS), ZERO + DOWN))
        return false;
    if (tadm_drain(&api, 1000, &r))
        drained = json_integer_value(json_object_get(r.json, "drained"));
    thttp_resp_free(&r);
    if (!CHECK_INT(drained, ZERO + DOWN))
        return false;

    if (!CHECK(trap_open()) || !CHECK(publish_poison()))
        return false;
    if (!CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, WAIT_MS), 1))
        return false;
    drained = -1;
    if (tadm_drain(&api, 10, &r))
        drained = json_integer_value(json_object_get(r.json, "drained"));
    thttp_resp_free(&r);
    return CHECK_INT(drained, 1);
}

/* npm_ci - tests/console/node_modules from package-lock.json when playwright-core is missing. */
static bool npm_ci(const char *dir)
{
    char probe[1200], cache[1200], *out = NULL;
    const char *tmp = getenv("GW_TEST_TMP");
    int rc;

    snprintf(probe, sizeof probe, "%s/node_modules/playwright-core/package.json", dir);
    if (access(probe, R_OK) == 0)
        return true;
    snprintf(cache, sizeof cache, "npm_config_cache=%s/npm-cache", tmp ? tmp : "/tmp");
    {
        /* in the folder, not --prefix: --prefix moves npm's global config too (the machine's
         * CA or registry settings live there) */
        const char *argv[] = {"sh", "-c", "cd \"$0\" && exec npm ci --no-audit --no-fund", dir,
                              NULL};
        const char *env[] = {cache, "NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false",
                             NULL};

        rc = tadm_run(argv, env, 300000, &out);
    }
    if (rc != 0)
        fprintf(stderr, "npm ci in %s: status %d\n%s\n", dir, rc, out ? out : "");
    free(out);
    return CHECK_INT(rc, 0);
}

static void run_browser(void)
{
    const char *root = getenv("GW_SOURCE_ROOT");
    const char *chromium = getenv("GW_CHROMIUM") ? getenv("GW_CHROMIUM") : "/usr/bin/chromium";
    char dir[900], script[1000], url[128], admin[128], tok[128], zero[64], down[64];
    char pay[96], poison[64], trap[128], chr[1100], *out = NULL;
    int rc;

    if (!CHECK(root != NULL) || !CHECK_INT(access(chromium, X_OK), 0))
        return;
    snprintf(dir, sizeof dir, "%s/tests/console", root);
    if (!npm_ci(dir))
        return;
    snprintf(script, sizeof script, "%s/console.mjs", dir);
    snprintf(url, sizeof url, "GW_CONSOLE_URL=%s", api.url);
    snprintf(admin, sizeof admin, "GW_ADMIN_TOKEN=%s", TAPI_ADMIN_TOKEN);
    snprintf(tok, sizeof tok, "GW_API_TOKEN=%s", TAPI_TOKEN);
    snprintf(zero, sizeof zero, "GW_CONSOLE_ZERO=%d", ZERO);
    snprintf(down, sizeof down, "GW_CONSOLE_DOWN=%d", DOWN);
    snprintf(pay, sizeof pay, "GW_CONSOLE_DOWN_PAYMENT=pay-down-%d", DOWN);
    snprintf(poison, sizeof poison, "GW_CONSOLE_POISON=poison-");
    snprintf(trap, sizeof trap, "GW_CONSOLE_TRAP=%s", trap_url);
    snprintf(chr, sizeof chr, "GW_CHROMIUM=%s", chromium);
    {
        const char *argv[] = {"node", script, NULL};
        const char *env[] = {url, admin, tok, zero, down, pay, poison, trap, chr,
                             /* loopback only: no proxy */
                             "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", NULL};

        rc = tadm_run(argv, env, 480000, &out);
    }
    printf("---- node tests/console/console.mjs (status %d)\n%s----\n", rc, out ? out : "");
    free(out);
    CHECK_INT(rc, 0);
    tcheck_context("a request reached %s, the poison's listener", trap_url);
    CHECK(!trap_hit());
    tcheck_context_clear();
}

static void tests(void)
{
    if (make_letters())
        run_browser();
    if (trap_fd >= 0)
        close(trap_fd);
}

int main(void)
{
    static const char *const worker_env[] = {TADM_BANK_237_DOWN, NULL};

    return tadm_main("console", &t, &relay, &worker, &api, worker_env, tests);
}
