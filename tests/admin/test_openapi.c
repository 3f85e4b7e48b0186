/*
 * tests/admin/test_openapi.c - openapi/payments.yaml is valid and the API answers as it says
 *
 * (a) The document is valid OpenAPI 3.1: Redocly CLI from npm lints it
 *     (openapi_lint.sh; installed once under the build tree). Without node/npm
 *     or without the npm registry that part is SKIPPED with a line saying so.
 * (b) The YAML becomes JSON (python3 with PyYAML: Debian python3-yaml, which
 *     scripts/stack installs) and a strict schema checker (tschema.c) is
 *     proven on known-bad instances, then checks every example of the
 *     document against its schema, then real answers of a running
 *     payments-api (with relay and worker on a database and vhost of their
 *     own): 202 accepted, 200 payment, 422 validation problem, 409 problem,
 *     401 problem, 404, 405, 200 dead letter page, 200 dead letter (JSON body
 *     and base64 body), 200 drain result, 202 replay, 409 already-replayed,
 *     200 reconciliation, health; and the console's (docs/console.md), with a
 *     session made by POST /admin/session: the session (201, 200, 204, 400,
 *     401, 403, 415, 422), overview, dead letter groups and filters, replay
 *     jobs (202, 200, 400, 404, 415, 422), the files (200, 404, 308) with
 *     their security headers. Each answer's status, media type, body (JSON,
 *     text, or none) and documented headers are looked up under its path and
 *     method.
 * The test fails when the document cannot be read; it reports SKIP (77) only
 * when nothing at all could be checked.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"
#include "tests/admin/tschema.h"

#define WAIT_MS 30000

static json_t *doc; /* the OpenAPI document as JSON */
static int checked; /* things checked against the document (live answers, examples, controls) */
static bool lint_ran;

/* ---------------------------------------------------------------- (a) lint */

static void lint(void)
{
    const char *spec = getenv("GW_OPENAPI"), *script = getenv("GW_OPENAPI_LINT");
    const char *dir = getenv("GW_NPM_CACHE");
    char *out = NULL;
    int rc;

    if (spec == NULL || script == NULL || dir == NULL) {
        FAIL("GW_OPENAPI, GW_OPENAPI_LINT and GW_NPM_CACHE must be set (meson sets them)");
        return;
    }
    {
        const char *argv[] = {"sh", script, spec, dir, NULL};
        rc = tadm_run(argv, NULL, 280000, &out);
    }
    printf("%s", out ? out : "");
    if (rc == 77) {
        printf("SKIP: part (a), the OpenAPI 3.1 validation by Redocly CLI, did not run "
               "(see the line above); part (b) still runs\n");
    } else {
        lint_ran = true;
        if (!CHECK_INT(rc, 0))
            fprintf(stderr, "openapi_lint.sh said:\n%s\n", out ? out : "");
    }
    free(out);
}

/* ---------------------------------------------------------------- (b) the document */

static bool load_doc(void)
{
    static const char code[] = "import json, sys, yaml\n"
                               "with open(sys.argv[1], encoding='utf-8') as f:\n"
                               "    d = yaml.safe_load(f)\n"
                               "with open(sys.argv[2], 'w', encoding='utf-8') as f:\n"
                               "    json.dump(d, f, default=str)\n";
    static const char *const pythons[] = {"python3", "/usr/bin/python3", NULL};
    const char *spec = getenv("GW_OPENAPI");
    char path[600];
    json_error_t err;
    int rc = -1;

    if (spec == NULL)
        return false;
    snprintf(path, sizeof path, "%s/openapi-%d.json", tproc_tmpdir(), (int)getpid());
    for (const char *const *py = pythons; *py != NULL && rc != 0; py++) {
        const char *argv[] = {*py, "-c", code, spec, path, NULL};
        char *out = NULL;

        rc = tadm_run(argv, NULL, 60000, &out);
        if (rc != 0)
            fprintf(stderr, "%s could not convert the YAML (status %d): %s\n", *py, rc,
                    out ? out : "");
        free(out);
    }
    if (rc != 0) {
        FAIL("cannot read %s as JSON: install python3 and PyYAML (Debian: python3-yaml; "
             "scripts/stack up installs it)",
             spec);
        return false;
    }
    doc = json_load_file(path, 0, &err);
    unlink(path);
    if (!CHECK(doc != NULL)) {
        fprintf(stderr, "the converted document: %s (line %d)\n", err.text, err.line);
        return false;
    }
    CHECK_CONTAINS(json_string_value(json_object_get(doc, "openapi")), "3.1.");
    return true;
}

static const json_t *schema_of(const char *name)
{
    return json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"), name);
}

/* @inst (JSON text) is valid (@valid) or not against components.schemas.@name. */
static void control(const char *name, const char *inst, bool valid)
{
    json_error_t err;
    json_t *j = json_loads(inst, JSON_DECODE_ANY, &err);
    char why[600];
    int n;

    if (!CHECK(j != NULL) || !CHECK(schema_of(name) != NULL)) {
        fprintf(stderr, "  control %s %s: %s\n", name, inst, err.text);
        json_decref(j);
        return;
    }
    n = tschema_validate(doc, schema_of(name), j, why, sizeof why);
    tcheck_context("control: %s %s %s (checker said: %s)", inst, valid ? "fits" : "breaks", name,
                   n ? why : "valid");
    CHECK_INT(n == 0, valid);
    tcheck_context_clear();
    json_decref(j);
    checked++;
}

/* The checker catches what it must; otherwise every later "valid" would mean nothing. */
static void controls(void)
{
#define ACC "{\"event_id\":\"e-1\",\"payment_id\":\"p-1\",\"status\":\"accepted\""
#define XD                                                                                         \
    "{\"queue\":\"payments.settlement\",\"reason\":\"rejected\",\"count\":1,\"exchange\":\"\","    \
    "\"routing_keys\":[\"payments.settlement\"],\"time\":\"2026-11-30T09:21:58Z\"}"
#define DL                                                                                         \
    "\"id\":5,\"event_id\":\"e\",\"payment_id\":null,\"routing_key\":\"payment.pix.approved\","    \
    "\"attempt\":1,\"last_error\":null,\"x_death\":[" XD "],\"first_death_reason\":\"rejected\","  \
    "\"drained_at\":\"2026-11-30T09:21:59.071Z\",\"replayed_at\":null,"                            \
    "\"group\":\"5d41402abc4b2a76b9719d911017c592\",\"error_class\":\"\",\"replay\":null"

    control("Accepted", ACC "}", true);
    control("Accepted", "{\"event_id\":\"e-1\",\"payment_id\":\"p-1\",\"status\":\"settled\"}",
            false);                                                               /* const */
    control("Accepted", "{\"event_id\":\"e-1\",\"status\":\"accepted\"}", false); /* required */
    control("Accepted", ACC ",\"extra\":1}", false); /* additionalProperties */
    control("Accepted", "{\"event_id\":\"e 1\",\"payment_id\":\"p-1\",\"status\":\"accepted\"}",
            false);                           /* pattern */
    control("Accepted", "[" ACC "}]", false); /* type */
    control("DeadLetter", "{" DL ",\"body\":{\"a\":1}}", true);
    control("DeadLetter", "{" DL ",\"body_base64\":\"AAE=\"}", true);
    control("DeadLetter", "{" DL ",\"body\":{},\"body_base64\":\"AAE=\"}", false); /* oneOf */
    control("DeadLetter", "{" DL "}", false);                                      /* oneOf */
    control("DeadLetter", "{" DL ",\"body_base64\":\"A*E=\"}", false); /* contentEncoding */
    control("DeadLetter", "{" DL ",\"body\":1,\"id\":0}", false);      /* minimum */
    control("DeadLetter", "{" DL ",\"body\":1,\"drained_at\":\"2026-02-30T00:00:00Z\"}",
            false); /* format date-time */
    control("DeadLetter", "{" DL ",\"body\":1,\"x_death\":[{\"queue\":\"q\"}]}",
            false); /* $ref into items, required */
    control("DeadLetter", "{" DL ",\"body\":1,\"attempt\":\"1\"}", false); /* type list */
    control("Problem",
            "{\"type\":\"https://paygw.example/problems/not-found\",\"title\":\"Not Found\","
            "\"status\":404,\"detail\":\"x\"}",
            true);
    control("Problem",
            "{\"type\":\"http://paygw.example/problems/not-found\",\"title\":\"Not Found\","
            "\"status\":404,\"detail\":\"x\"}",
            false); /* pattern */
    control("Problem",
            "{\"type\":\"https://paygw.example/problems/x\",\"title\":\"X\",\"status\":200,"
            "\"detail\":\"x\"}",
            false); /* minimum */
    control("Reconciliation",
            "{\"by_status\":{\"settled\":{\"count\":1,\"amount_cents\":5}},"
            "\"checks\":[],\"ok\":true}",
            true);
    control(
        "Reconciliation",
        "{\"by_status\":{\"bogus\":{\"count\":1,\"amount_cents\":5}},\"checks\":[],\"ok\":true}",
        false); /* propertyNames */
    control("Reconciliation",
            "{\"by_status\":{\"settled\":{\"count\":1}},\"checks\":[],\"ok\":true}",
            false); /* additionalProperties schema */
    control("DeadLetter", "{" DL ",\"body\":1,\"group\":\"not-a-key\"}",
            false); /* pattern (the later member wins) */
    control("Session",
            "{\"operator\":\"alice\",\"csrf\":\"0123456789abcdef0123456789abcdef0123456789abcdef"
            "0123456789abcdef\",\"expires_at\":\"2026-11-30T10:17:11Z\"}",
            true);
    control("Session",
            "{\"operator\":\"alice\",\"csrf\":\"xyz\",\"expires_at\":\"2026-11-30T10:17:11Z\"}",
            false); /* pattern */
    control("ReplaySelector", "{\"ids\":[1,2]}", true);
    control("ReplaySelector", "{\"group\":\"5d41402abc4b2a76b9719d911017c592\"}", true);
    control("ReplaySelector", "{\"ids\":[1],\"group\":\"k\"}", false); /* oneOf */
    control("ReplaySelector", "{\"ids\":[]}", false);                  /* minItems */
    control("ReplayJobLetter", "{\"letter_id\":1,\"result\":\"lost\",\"detail\":null,\"at\":null}",
            false); /* enum */
    control("ReplayJobLetter", "{\"letter_id\":1,\"result\":null,\"detail\":null,\"at\":null}",
            true);
    control("DeadLetterPage", "{\"items\":[],\"next\":null}", true);
    control("DeadLetterPage", "{\"items\":[],\"next\":5}", false);
    control("Payment",
            "{\"payment_id\":\"p\",\"event_id\":\"e\",\"method\":\"boleto\",\"decision\":"
            "\"approved\",\"amount_cents\":1,\"currency\":\"BRL\",\"payee\":{\"bank\":\"001\","
            "\"account\":\"1\"},\"status\":\"settled\",\"attempts\":1,\"last_error\":null,"
            "\"created_at\":\"2026-11-30T09:19:52.733Z\",\"updated_at\":\"2026-11-30T09:19:52Z\","
            "\"settled_at\":null}",
            false); /* enum */
    {
        /* an unknown keyword is a violation, never ignored */
        json_t *s = json_pack("{s:s,s:i}", "type", "integer", "multipleOf", 2);
        json_t *i = json_integer(4);
        CHECK(tschema_validate(doc, s, i, NULL, 0) > 0);
        json_decref(s);
        json_decref(i);
        checked++;
    }
#undef ACC
#undef XD
#undef DL
}

/* Check @inst against @schema; @what names it in a failure. */
static void must_fit(const char *what, const json_t *schema, const json_t *inst)
{
    char why[1500];
    int n = tschema_validate(doc, schema, inst, why, sizeof why);

    tcheck_context("%s", what);
    if (!CHECK_INT(n, 0))
        fprintf(stderr, "    %s\n    instance: %s\n", why, tadm_dump(inst));
    tcheck_context_clear();
    checked++;
}

/* Every example in the document fits its schema. */
static void examples(void)
{
    const char *name, *path, *method, *status, *media, *ex;
    json_t *s, *item, *op, *resp, *m, *e;
    char what[400];
    int before = checked;

    json_object_foreach(json_object_get(json_object_get(doc, "components"), "schemas"), name, s)
    {
        if (json_object_get(s, "example") != NULL) {
            snprintf(what, sizeof what, "components.schemas.%s.example", name);
            must_fit(what, s, json_object_get(s, "example"));
        }
    }
    json_object_foreach(json_object_get(doc, "paths"), path, item)
    {
        json_object_foreach(item, method, op)
        {
            const json_t *body = tschema_deref(doc, json_object_get(op, "requestBody"));

            json_object_foreach(json_object_get(body, "content"), media, m)
            {
                if (json_object_get(m, "example") != NULL) {
                    snprintf(what, sizeof what, "%s %s request %s example", method, path, media);
                    must_fit(what, json_object_get(m, "schema"), json_object_get(m, "example"));
                }
            }
            json_object_foreach(json_object_get(op, "responses"), status, resp)
            {
                const json_t *r = tschema_deref(doc, resp);

                json_object_foreach(json_object_get(r, "content"), media, m)
                {
                    const json_t *schema = json_object_get(m, "schema");

                    if (json_object_get(m, "example") != NULL) {
                        snprintf(what, sizeof what, "%s %s %s %s example", method, path, status,
                                 media);
                        must_fit(what, schema, json_object_get(m, "example"));
                    }
                    json_object_foreach(json_object_get(m, "examples"), ex, e)
                    {
                        snprintf(what, sizeof what, "%s %s %s %s examples.%s", method, path, status,
                                 media, ex);
                        must_fit(what, schema, json_object_get(tschema_deref(doc, e), "value"));
                    }
                }
            }
        }
    }
    printf("%d examples of the document fit their schemas\n", checked - before);
    CHECK(checked - before >= 10);
}

/* ---------------------------------------------------------------- (b) live answers */

static te2e t;
static tapi api;
static tprog relay, worker;
static int live; /* live answers checked */

/*
 * @r, the answer to @method @tmpl, has status @status and fits the document:
 * the response documented for that status, its media type, its body schema (a
 * JSON body decoded, any other a string; none documented: an empty body), its
 * documented headers (X-Request-Id and Cache-Control are always there, and
 * so is every header documented with required: true).
 */
static void answer_fits(const char *method, const char *tmpl, const thttp_resp *r, long status)
{
    const json_t *item = json_object_get(json_object_get(doc, "paths"), tmpl);
    const json_t *op = json_object_get(item, method);
    const json_t *resp, *media, *hdr;
    char code[8], ct[128], what[300];
    const char *ct_full = thttp_header(r, "Content-Type"), *name;

    if (op == NULL && status == 405) {
        const char *m; /* documented under the path's own operation */
        json_t *o;
        json_object_foreach((json_t *)item, m, o)
        {
            if (op == NULL)
                op = o;
        }
    }
    snprintf(code, sizeof code, "%ld", status);
    snprintf(what, sizeof what, "%s %s -> %ld", method, tmpl, r->status);
    tcheck_context("%s: %.300s", what, r->body);
    if (!CHECK(op != NULL) || !CHECK_INT(r->status, status))
        goto out;
    resp = tschema_deref(doc, json_object_get(json_object_get(op, "responses"), code));
    if (!CHECK(resp != NULL)) /* the status is documented for this operation */
        goto out;
    snprintf(ct, sizeof ct, "%s", ct_full ? ct_full : "");
    ct[strcspn(ct, "; ")] = '\0';
    if (json_object_get(resp, "content") == NULL) { /* documented without a body */
        CHECK_INT(r->len, 0);
    } else if (media = json_object_get(json_object_get(resp, "content"), ct),
               CHECK(media != NULL)) { /* the media type is documented */
        json_t *body = strstr(ct, "json") != NULL
                           ? json_loadb(r->body, r->len, JSON_DECODE_ANY, NULL)
                           : json_stringn(r->body, r->len); /* text: the schema of a string */
        if (CHECK(body != NULL))
            must_fit(what, json_object_get(media, "schema"), body);
        json_decref(body);
    }
    json_object_foreach(json_object_get(resp, "headers"), name, hdr)
    {
        const json_t *h = tschema_deref(doc, hdr), *schema = json_object_get(h, "schema");
        const char *v = thttp_header(r, name);
        json_t *inst;

        tcheck_context("%s: header %s: %s", what, name, v ? v : "(absent)");
        if (strcmp(name, "X-Request-Id") == 0 || strcmp(name, "Cache-Control") == 0 ||
            strcmp(name, "WWW-Authenticate") == 0 || strcmp(name, "Allow") == 0 ||
            strcmp(name, "Location") == 0 || json_is_true(json_object_get(h, "required")))
            CHECK(v != NULL); /* documented as always sent with this answer */
        if (v == NULL)
            continue;
        if (json_is_string(json_object_get(tschema_deref(doc, schema), "type")) &&
            strcmp(json_string_value(json_object_get(tschema_deref(doc, schema), "type")),
                   "integer") == 0)
            inst = json_integer(strspn(v, "0123456789") == strlen(v) && *v ? atoll(v) : -1);
        else
            inst = json_string(v);
        must_fit(what, schema, inst);
        json_decref(inst);
    }
    live++;
out:
    tcheck_context_clear();
}

/* Send @method @path with Bearer @token (NULL: none) and check the answer as @tmpl's. */
static json_t *call(const char *method, const char *tmpl, const char *path, const char *token,
                    long status)
{
    char lower[8] = "";
    thttp_resp r;
    json_t *j;

    tadm_call(&api, method, path, token, &r);
    for (size_t i = 0; i < sizeof lower - 1 && method[i] != '\0'; i++)
        lower[i] = (char)tolower((unsigned char)method[i]); /* the document's key: "get" */
    answer_fits(lower, tmpl, &r, status);
    j = json_incref(r.json);
    thttp_resp_free(&r);
    return j;
}

/*
 * Send @method @path with the header lines @headers (NULL-terminated, may be NULL) and @body
 * (NULL: none; a POST then sends an empty one), check the answer as @tmpl's, and return its
 * JSON body; its Set-Cookie into @cookie (size @len) when not NULL.
 */
static json_t *send_as(const char *method, const char *tmpl, const char *path,
                       const char *const *headers, const char *body, long status, char *cookie,
                       size_t len)
{
    char url[512], lower[8] = "";
    thttp_resp r;
    json_t *j;

    snprintf(url, sizeof url, "%s%s", api.url, path);
    if (body == NULL && strcmp(method, "POST") == 0)
        body = "";
    thttp_request(method, url, headers, body, body != NULL ? strlen(body) : 0, &r);
    for (size_t i = 0; i < sizeof lower - 1 && method[i] != '\0'; i++)
        lower[i] = (char)tolower((unsigned char)method[i]);
    answer_fits(lower, tmpl, &r, status);
    if (cookie != NULL)
        snprintf(cookie, len, "%s",
                 thttp_header(&r, "Set-Cookie") ? thttp_header(&r, "Set-Cookie") : "");
    j = json_incref(r.json);
    thttp_resp_free(&r);
    return j;
}

#define JSON_CT "Content-Type: application/json"
#define BEARER  "Authorization: Bearer " TAPI_ADMIN_TOKEN

/* The console's calls (docs/console.md) with a session of their own; @replayed_id is a
 * dead letter replayed before, @event_id its event. */
static void console_answers(long long replayed_id, const char *event_id)
{
    static const char *const json_only[] = {JSON_CT, NULL};
    static const char *const bearer_json[] = {BEARER, JSON_CT, NULL};
    static const char *const bearer[] = {BEARER, NULL};
    char set_cookie[256], cookie[160], csrf[160], body[256], path[400], big[256];
    const char *session[] = {cookie, NULL};
    const char *session_json[] = {cookie, JSON_CT, NULL};
    const char *session_csrf[] = {cookie, csrf, JSON_CT, NULL};
    const char *key = NULL;
    long long job = -1;
    json_t *j, *groups;

    /* the login, and what it refuses */
    snprintf(body, sizeof body, "{\"token\":\"%s\",\"operator\":\"alice\"}", TAPI_ADMIN_TOKEN);
    j = send_as("POST", "/admin/session", "/admin/session", json_only, body, 201, set_cookie,
                sizeof set_cookie);
    CHECK_STR(json_string_value(json_object_get(j, "operator")), "alice");
    snprintf(cookie, sizeof cookie, "Cookie: %.*s", (int)strcspn(set_cookie, ";"), set_cookie);
    snprintf(csrf, sizeof csrf, "X-CSRF-Token: %s",
             json_string_value(json_object_get(j, "csrf"))
                 ? json_string_value(json_object_get(j, "csrf"))
                 : "");
    json_decref(j);
    json_decref(send_as("POST", "/admin/session", "/admin/session", json_only,
                        "{\"token\":\"not-the-admin-token\"}", 401, NULL, 0));
    snprintf(body, sizeof body, "{\"token\":\"%s\",\"operator\":\"a b\"}", TAPI_ADMIN_TOKEN);
    json_decref(send_as("POST", "/admin/session", "/admin/session", json_only, body, 422, NULL, 0));
    json_decref(send_as("POST", "/admin/session", "/admin/session", json_only, "{", 400, NULL, 0));
    json_decref(send_as("POST", "/admin/session", "/admin/session",
                        (const char *const[]){"Content-Type: text/plain", NULL}, body, 415, NULL,
                        0));
    json_decref(send_as("PUT", "/admin/session", "/admin/session", bearer, NULL, 405, NULL, 0));
    json_decref(send_as("GET", "/admin/session", "/admin/session", session, NULL, 200, NULL, 0));
    json_decref(send_as("GET", "/admin/session", "/admin/session", NULL, NULL, 401, NULL, 0));
    json_decref(send_as("GET", "/admin/session", "/admin/session", bearer, NULL, 401, NULL, 0));

    /* what the page reads, with the cookie */
    json_decref(send_as("GET", "/admin/overview", "/admin/overview", session, NULL, 200, NULL, 0));
    json_decref(send_as("GET", "/admin/overview", "/admin/overview", bearer, NULL, 200, NULL, 0));
    json_decref(send_as("GET", "/admin/overview", "/admin/overview", NULL, NULL, 401, NULL, 0));
    groups = send_as("GET", "/admin/dlq/groups", "/admin/dlq/groups", session, NULL, 200, NULL, 0);
    CHECK(json_array_size(json_object_get(groups, "groups")) >= 1);
    key = json_string_value(
        json_object_get(json_array_get(json_object_get(groups, "groups"), 0), "key"));
    snprintf(path, sizeof path, "/admin/dlq?group=%s&q=e&limit=5", key ? key : "");
    json_decref(send_as("GET", "/admin/dlq", path, session, NULL, 200, NULL, 0));
    snprintf(path, sizeof path, "/admin/dlq?event_id=%s", event_id);
    j = send_as("GET", "/admin/dlq", path, session, NULL, 200, NULL, 0);
    CHECK_INT((long)json_array_size(json_object_get(j, "items")), 1);
    CHECK(
        json_is_object(json_object_get(json_array_get(json_object_get(j, "items"), 0), "replay")));
    json_decref(j);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(path, sizeof path, "/admin/dlq?q=%s", big);
    json_decref(send_as("GET", "/admin/dlq", path, session, NULL, 422, NULL, 0));

    /* replay jobs: the CSRF token is needed with the cookie */
    snprintf(body, sizeof body, "{\"ids\":[%lld]}", replayed_id);
    json_decref(
        send_as("POST", "/admin/replays", "/admin/replays", session_json, body, 403, NULL, 0));
    json_decref(
        send_as("POST", "/admin/dlq/drain", "/admin/dlq/drain", session, NULL, 403, NULL, 0));
    j = send_as("POST", "/admin/replays", "/admin/replays", session_csrf, body, 202, NULL, 0);
    job = json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    json_decref(send_as("POST", "/admin/replays", "/admin/replays", bearer_json,
                        "{\"group\":\"no-such-group\"}", 422, NULL, 0));
    json_decref(send_as("POST", "/admin/replays", "/admin/replays", bearer_json,
                        "{\"ids\":[424242]}", 422, NULL, 0));
    json_decref(send_as("POST", "/admin/replays", "/admin/replays", bearer_json, "{\"ids\":[]}",
                        422, NULL, 0));
    json_decref(
        send_as("POST", "/admin/replays", "/admin/replays", bearer_json, "[1", 400, NULL, 0));
    json_decref(send_as("POST", "/admin/replays", "/admin/replays",
                        (const char *const[]){BEARER, "Content-Type: text/plain", NULL}, body, 415,
                        NULL, 0));
    CHECK_WAIT_LONG(t.db, "SELECT count(*) FROM replay_job_letters WHERE result IS NOT NULL", 1,
                    WAIT_MS, 25);
    json_decref(send_as("GET", "/admin/replays", "/admin/replays", session, NULL, 200, NULL, 0));
    snprintf(path, sizeof path, "/admin/replays/%lld", job);
    j = send_as("GET", "/admin/replays/{id}", path, session, NULL, 200, NULL, 0);
    CHECK_STR(json_string_value(
                  json_object_get(json_array_get(json_object_get(j, "letters"), 0), "result")),
              "already_replayed");
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "job"), "requested_by")),
              "alice");
    json_decref(j);
    snprintf(path, sizeof path, "/admin/replays/%lld?limit=0", job);
    json_decref(send_as("GET", "/admin/replays/{id}", path, session, NULL, 422, NULL, 0));
    json_decref(
        send_as("GET", "/admin/replays/{id}", "/admin/replays/424242", bearer, NULL, 404, NULL, 0));
    json_decref(
        send_as("GET", "/admin/replays/{id}", "/admin/replays/abc", bearer, NULL, 404, NULL, 0));

    /* the files: no credential, strict headers */
    json_decref(send_as("GET", "/admin/ui/{file}", "/admin/ui/", NULL, NULL, 200, NULL, 0));
    json_decref(send_as("GET", "/admin/ui/{file}", "/admin/ui/app.js", NULL, NULL, 200, NULL, 0));
    json_decref(
        send_as("GET", "/admin/ui/{file}", "/admin/ui/style.css", NULL, NULL, 200, NULL, 0));
    json_decref(send_as("GET", "/admin/ui/{file}", "/admin/ui/nope.txt", NULL, NULL, 404, NULL, 0));
    json_decref(send_as("POST", "/admin/ui/{file}", "/admin/ui/app.js", NULL, NULL, 405, NULL, 0));
    json_decref(send_as("GET", "/admin/ui", "/admin/ui", NULL, NULL, 308, NULL, 0));

    /* the logout: with the CSRF token, then the session is gone */
    json_decref(send_as("DELETE", "/admin/session", "/admin/session", session, NULL, 403, NULL, 0));
    json_decref(
        send_as("DELETE", "/admin/session", "/admin/session", session_csrf, NULL, 204, NULL, 0));
    json_decref(send_as("GET", "/admin/session", "/admin/session", session, NULL, 401, NULL, 0));
    json_decref(groups);
}

static void post_payment(const char *body, const char *const *extra, long status)
{
    thttp_resp r;

    tapi_post(&api, body, extra, &r);
    answer_fits("post", "/v1/payments", &r, status);
    thttp_resp_free(&r);
}

static void live_answers(void)
{
    const char *worker_env[] = {"BANK_SIM_RULES=237/*:down", NULL};
    char *ok = tadm_payment_json("evt-ok", "pay-ok", "pix", "approved", 15000, "001", "1234-5");
    char *zero = tadm_payment_json("evt-zero", "pay-zero", "ted", "approved", 0, "033", "9-1");
    char *refused = tadm_payment_json("evt-ref", "pay-ref", "card", "refused", 700, "104", "42-0");
    char *other =
        tadm_payment_json("evt-other", "pay-ok", "pix", "approved", 15000, "001", "1234-5");
    char *changed =
        tadm_payment_json("evt-ok", "pay-ok", "pix", "approved", 15001, "001", "1234-5");
    static const char poison[] = "\x01not json\xff";
    tmq_pub raw = {.exchange = "",
                   .routing_key = TADM_DLQ,
                   .body = poison,
                   .len = sizeof poison,
                   .mandatory = true,
                   .bare = true};
    json_t *j = NULL;
    char path[96];
    long long id_json = -1, id_b64 = -1;

    if (!CHECK(tadm_all_start(&t, &relay, &worker, &api, worker_env)))
        goto out;
    /* the payments API */
    post_payment(ok, NULL, 202);
    post_payment(ok, NULL, 202); /* the replay: Idempotent-Replayed */
    post_payment(zero, NULL, 202);
    post_payment(refused, NULL, 202);
    post_payment("{\"event_id\":\"evt bad\",\"amount_cents\":1.5,\"extra\":true}", NULL, 422);
    post_payment(changed, NULL, 422); /* idempotency-key-reused */
    post_payment(other, NULL, 409);   /* payment-already-decided */
    post_payment("{\"event_id\":", NULL, 400);
    post_payment(ok, (const char *const[]){"Content-Type: text/plain", NULL}, 415);
    CHECK_WAIT_LONG(t.db, "SELECT count(*) FROM payments WHERE status = 'settled'", 1, WAIT_MS, 25);
    CHECK_WAIT_LONG(t.db, "SELECT count(*) FROM payments WHERE status = 'unroutable'", 1, WAIT_MS,
                    25);
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 1, WAIT_MS), 1);
    json_decref(call("GET", "/v1/payments/{payment_id}", "/v1/payments/pay-ok", TAPI_TOKEN, 200));
    json_decref(call("GET", "/v1/payments/{payment_id}", "/v1/payments/pay-zero", TAPI_TOKEN, 200));
    json_decref(call("GET", "/v1/payments/{payment_id}", "/v1/payments/pay-ref", TAPI_TOKEN, 200));
    json_decref(call("GET", "/v1/payments/{payment_id}", "/v1/payments/nope", TAPI_TOKEN, 404));
    json_decref(call("GET", "/v1/payments/{payment_id}", "/v1/payments/pay-ok", NULL, 401));
    json_decref(
        call("GET", "/v1/payments/{payment_id}", "/v1/payments/pay-ok", TAPI_ADMIN_TOKEN, 401));
    json_decref(
        call("DELETE", "/v1/payments/{payment_id}", "/v1/payments/pay-ok", TAPI_TOKEN, 405));

    /* the admin API: a JSON letter and a binary one */
    CHECK(tadm_publish(&t, &raw));
    CHECK_INT(tadm_wait_depth(&t, TADM_DLQ, 2, WAIT_MS), 2);
    json_decref(call("POST", "/admin/dlq/drain", "/admin/dlq/drain?max=0", TAPI_ADMIN_TOKEN, 422));
    json_decref(call("POST", "/admin/dlq/drain", "/admin/dlq/drain", TAPI_TOKEN, 401));
    json_decref(call("GET", "/admin/dlq/drain", "/admin/dlq/drain", TAPI_ADMIN_TOKEN, 405));
    j = call("POST", "/admin/dlq/drain", "/admin/dlq/drain?max=10", TAPI_ADMIN_TOKEN, 200);
    CHECK_INT(json_integer_value(json_object_get(j, "drained")), 2);
    id_json = tadm_id(tadm_letter_for(json_object_get(j, "messages"), "evt-zero"));
    for (size_t i = 0; i < json_array_size(json_object_get(j, "messages")); i++) {
        json_t *l = json_array_get(json_object_get(j, "messages"), i);
        if (json_object_get(l, "body_base64") != NULL)
            id_b64 = tadm_id(l);
    }
    CHECK(id_json > 0 && id_b64 > 0);
    json_decref(j);
    json_decref(call("POST", "/admin/dlq/drain", "/admin/dlq/drain", TAPI_ADMIN_TOKEN, 200));
    json_decref(call("GET", "/admin/dlq", "/admin/dlq", TAPI_ADMIN_TOKEN, 200));
    j = call("GET", "/admin/dlq", "/admin/dlq?limit=1", TAPI_ADMIN_TOKEN, 200);
    CHECK(json_is_string(json_object_get(j, "next")));
    json_decref(j);
    json_decref(call("GET", "/admin/dlq", "/admin/dlq?limit=0", TAPI_ADMIN_TOKEN, 422));
    json_decref(call("GET", "/admin/dlq", "/admin/dlq", NULL, 401));
    snprintf(path, sizeof path, "/admin/dlq/%lld", id_json);
    json_decref(call("GET", "/admin/dlq/{id}", path, TAPI_ADMIN_TOKEN, 200));
    snprintf(path, sizeof path, "/admin/dlq/%lld", id_b64);
    json_decref(call("GET", "/admin/dlq/{id}", path, TAPI_ADMIN_TOKEN, 200));
    json_decref(call("GET", "/admin/dlq/{id}", "/admin/dlq/424242", TAPI_ADMIN_TOKEN, 404));
    snprintf(path, sizeof path, "/admin/dlq/%lld/replay", id_json);
    json_decref(call("POST", "/admin/dlq/{id}/replay", path, TAPI_ADMIN_TOKEN, 202));
    json_decref(call("POST", "/admin/dlq/{id}/replay", path, TAPI_ADMIN_TOKEN, 409));
    json_decref(
        call("POST", "/admin/dlq/{id}/replay", "/admin/dlq/424242/replay", TAPI_ADMIN_TOKEN, 404));
    json_decref(
        call("GET", "/admin/reconciliation", "/admin/reconciliation", TAPI_ADMIN_TOKEN, 200));
    json_decref(call("GET", "/admin/reconciliation", "/admin/reconciliation", TAPI_TOKEN, 401));
    json_decref(call("GET", "/healthz", "/healthz", NULL, 200));
    json_decref(call("GET", "/readyz", "/readyz", NULL, 200));
    console_answers(id_json, "evt-zero");
    printf("%d live answers fit the document\n", live);
    CHECK(live >= 70);
out:
    tadm_all_stop(&relay, &worker, &api);
    free(ok);
    free(zero);
    free(refused);
    free(other);
    free(changed);
}

int main(void)
{
    int rc;

    TRUN(lint);
    if (load_doc()) {
        TRUN(controls);
        TRUN(examples);
        rc = te2e_init(&t, "openapi");
        if (rc == 0)
            TRUN(live_answers);
        else if (rc != 77)
            FAIL("the fixture could not be set up");
        else
            printf("SKIP: part (b) against a running API (GW_TEST_PG_URL and GW_STACK unset); "
                   "the document's own checks ran\n");
        te2e_cleanup(&t);
    }
    json_decref(doc);
    if (!lint_ran && checked == 0 && tcheck_failures() == 0)
        return 77;
    return tcheck_summary("test_openapi");
}
