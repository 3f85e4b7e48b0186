/*
 * tests/admin/test_observability_metrics.c - every metric the dashboard and the alerts name is
 * exported
 *
 * Runs payments-api, -relay and -worker, scrapes their /metrics, and reads
 * every PromQL expression of docs/observability/paygw-dashboard.json (each
 * "expr" member) and of docs/observability/paygw-alerts.yml (each "expr:").
 * Each metric name an expression uses must be a series some program exports:
 * a histogram only through its _bucket, _sum and _count series, as Prometheus
 * stores it. `up` is exempt: Prometheus makes it for each scrape target. An
 * equality matcher (queue="payments.settlement.dlq") must match an exported
 * series of that name, and a regex matcher must match one too.
 */
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/admin/tadmin.h"
#include "tests/support/tcheck.h"
#include "tests/support/thttp.h"

static te2e t;
static tapi api;
static tprog relay, worker;

#define MAX_MATCHERS 8

/* One use of a metric in an expression: its name and its label matchers. */
typedef struct use {
    char name[128];
    int nmatchers;
    struct {
        char label[64];
        char op[3]; /* "=", "!=", "=~", "!~" */
        char value[256];
    } m[MAX_MATCHERS];
} use;

typedef void (*use_fn)(const use *u, const char *expr, void *arg);

static bool is_name_start(char c)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':';
}

static bool is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == ':';
}

/* After a quote at @p: the character after the closing quote (backslash escapes skipped). */
static const char *skip_string(const char *p)
{
    char q = *p++;

    while (*p != '\0' && *p != q)
        p += (*p == '\\' && p[1] != '\0') ? 2 : 1;
    return *p ? p + 1 : p;
}

static const char *skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

/* After a bracket at @p: the character after its match (strings inside skipped). */
static const char *skip_group(const char *p, char open, char close)
{
    int depth = 0;

    while (*p != '\0') {
        if (*p == '"' || *p == '\'' || *p == '`') {
            p = skip_string(p);
            continue;
        }
        if (*p == open)
            depth++;
        else if (*p == close && --depth == 0)
            return p + 1;
        p++;
    }
    return p;
}

/* The label matchers of the selector whose '{' is at @p, into @u; returns after the '}'. */
static const char *read_matchers(const char *p, use *u)
{
    p++;
    for (;;) {
        const char *s;
        size_t n;

        p = skip_space(p);
        if (*p == '}' || *p == '\0')
            return *p ? p + 1 : p;
        if (*p == ',') {
            p++;
            continue;
        }
        s = p;
        while (is_name_char(*p))
            p++;
        if (p == s || u->nmatchers == MAX_MATCHERS)
            return skip_group(s - 1, '{', '}'); /* not a matcher we read: skip the rest */
        n = (size_t)(p - s);
        snprintf(u->m[u->nmatchers].label, sizeof u->m[0].label, "%.*s", (int)n, s);
        p = skip_space(p);
        n = (p[0] == '!' || p[1] == '~' || (p[0] == '=' && p[1] == '~')) ? 2 : 1;
        snprintf(u->m[u->nmatchers].op, sizeof u->m[0].op, "%.*s", (int)n, p);
        p = skip_space(p + n);
        if (*p != '"' && *p != '\'' && *p != '`')
            return skip_group(s - 1, '{', '}');
        s = p + 1;
        p = skip_string(p);
        n = (size_t)(p - 1 - s);
        snprintf(u->m[u->nmatchers].value, sizeof u->m[0].value, "%.*s", (int)n, s);
        u->nmatchers++;
    }
}

/* Whether @p starts the grouping @word of an aggregation: the word, then a '('. */
static bool modifier(const char *p, const char *word)
{
    size_t n = strlen(word);

    return strncmp(p, word, n) == 0 && !is_name_char(p[n]) && *skip_space(p + n) == '(';
}

/*
 * expr_uses - call @fn for each metric selector of the PromQL @expr: names
 * not followed by '(' (functions, aggregations) and not keywords; label lists
 * of by/without/on/ignoring/group_*, strings, ranges and Grafana's $variables
 * skipped.
 */
static void expr_uses(const char *expr, use_fn fn, void *arg)
{
    static const char *const keywords[] = {
        "by", "without", "on",     "ignoring", "group_left", "group_right", "bool", "and",
        "or", "unless",  "offset", "atan2",    "inf",        "nan",         NULL};
    const char *p = expr;

    while (*p != '\0') {
        if (*p == '"' || *p == '\'' || *p == '`') {
            p = skip_string(p);
        } else if (*p == '[') {
            p = skip_group(p, '[', ']');
        } else if (*p == '{') {
            p = skip_group(p, '{', '}'); /* a selector without a name */
        } else if (*p == '$') {
            p++;
            if (*p == '{')
                p = skip_group(p, '{', '}');
            while (is_name_char(*p))
                p++;
        } else if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
            while (isalnum((unsigned char)*p) || *p == '.')
                p++; /* 0.99, 1e3, 5m */
        } else if (is_name_start(*p)) {
            const char *s = p, *after;
            bool keyword = false;
            use u;

            while (is_name_char(*p))
                p++;
            for (int i = 0; keywords[i] != NULL; i++)
                keyword |= strlen(keywords[i]) == (size_t)(p - s) &&
                           strncmp(keywords[i], s, (size_t)(p - s)) == 0;
            after = skip_space(p);
            if (!keyword && (modifier(after, "by") || modifier(after, "without"))) {
                p = skip_group(strchr(after, '('), '(', ')'); /* sum by (le) (...) */
                continue;
            }
            if (*after == '(') {
                if (keyword) /* by (le), on (job): label names */
                    p = skip_group(after, '(', ')');
                continue; /* a function or an aggregation */
            }
            if (keyword)
                continue;
            memset(&u, 0, sizeof u);
            snprintf(u.name, sizeof u.name, "%.*s", (int)(p - s), s);
            if (*after == '{')
                p = read_matchers(after, &u);
            fn(&u, expr, arg);
        } else {
            p++;
        }
    }
}

/* ---- what the programs export ------------------------------------------------------------ */

typedef struct exported {
    char *text; /* the three /metrics bodies, one after the other; owned */
} exported;

static bool scrape(exported *x, const char *base, const char *label)
{
    thttp_resp r = {0};
    size_t old = x->text ? strlen(x->text) : 0;
    char *grown;

    if (!CHECK(thttp_get(base, "/metrics", NULL, &r)) || !CHECK_INT(r.status, 200)) {
        fprintf(stderr, "no /metrics from %s\n", label);
        thttp_resp_free(&r);
        return false;
    }
    grown = realloc(x->text, old + r.len + 2);
    if (!CHECK(grown != NULL)) {
        thttp_resp_free(&r);
        return false;
    }
    x->text = grown;
    memcpy(x->text + old, r.body, r.len);
    strcpy(x->text + old + r.len, "\n");
    thttp_resp_free(&r);
    return true;
}

/* Whether the labels of a series line (between its braces, @labels of @len) satisfy matcher @i. */
static bool labels_match(const char *labels, size_t len, const use *u, int i)
{
    char want[400];
    const char *v;
    regex_t re;
    char pattern[300], value[256];
    bool ok;

    if (strcmp(u->m[i].op, "=") == 0) {
        snprintf(want, sizeof want, "%s=\"%s\"", u->m[i].label, u->m[i].value);
        for (v = labels; v != NULL && v < labels + len; v = strstr(v + 1, want))
            if (strncmp(v, want, strlen(want)) == 0 && v + strlen(want) <= labels + len &&
                (v == labels || v[-1] == ',' || v[-1] == '{'))
                return true;
        return false;
    }
    if (strcmp(u->m[i].op, "=~") != 0)
        return true; /* negative matchers name nothing that must exist */
    snprintf(want, sizeof want, "%s=\"", u->m[i].label);
    for (v = labels; (v = strstr(v, want)) != NULL && v < labels + len; v++) {
        const char *s = v + strlen(want), *e = strchr(s, '"');

        if (e == NULL || (v != labels && v[-1] != ',' && v[-1] != '{'))
            continue;
        snprintf(value, sizeof value, "%.*s", (int)(e - s), s);
        snprintf(pattern, sizeof pattern, "^(%s)$", u->m[i].value);
        if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
            return false;
        ok = regexec(&re, value, 0, NULL, 0) == 0;
        regfree(&re);
        if (ok)
            return true;
    }
    return false;
}

/* Whether some exported series is named @u->name and satisfies every matcher of @u. */
static bool is_exported(const exported *x, const use *u)
{
    size_t n = strlen(u->name);

    for (const char *line = x->text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);

        if (line[0] != '#' && len > n && strncmp(line, u->name, n) == 0 &&
            (line[n] == '{' || line[n] == ' ')) {
            bool all = true;
            const char *close = memchr(line, '}', len);
            size_t llen = line[n] == '{' && close ? (size_t)(close - line - n) : 0;

            for (int i = 0; i < u->nmatchers && all; i++)
                all = labels_match(line + n, llen, u, i);
            if (all)
                return true;
        }
        line = end ? end + 1 : NULL;
    }
    return false;
}

/* ---- the two files ----------------------------------------------------------------------- */

typedef struct checking {
    const exported *x;
    const char *file;
    int names; /* metric uses seen */
    int missing;
} checking;

static void check_use(const use *u, const char *expr, void *arg)
{
    checking *c = arg;

    c->names++;
    if (strcmp(u->name, "up") == 0)
        return; /* made by Prometheus for every target */
    if (is_exported(c->x, u))
        return;
    c->missing++;
    if (u->nmatchers > 0)
        FAIL("%s names %s{%s%s\"%s\"%s}, which no program exports (in: %s)", c->file, u->name,
             u->m[0].label, u->m[0].op, u->m[0].value, u->nmatchers > 1 ? ",..." : "", expr);
    else
        FAIL("%s names %s, which no program exports (in: %s)", c->file, u->name, expr);
}

/* Every "expr" string member anywhere in @j. */
static void dashboard_exprs(const json_t *j, checking *c, int *exprs)
{
    const char *key;
    json_t *v;
    size_t i;

    if (json_is_object(j)) {
        json_object_foreach((json_t *)j, key, v)
        {
            if (strcmp(key, "expr") == 0 && json_is_string(v)) {
                (*exprs)++;
                expr_uses(json_string_value(v), check_use, c);
            } else {
                dashboard_exprs(v, c, exprs);
            }
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v)
        {
            dashboard_exprs(v, c, exprs);
        }
    }
}

/*
 * rules_exprs - every "expr:" of a rules file: its value on the line, quoted or
 * not, or a block (| or >) made of the more indented lines after it.
 */
static int rules_exprs(const char *path, checking *c)
{
    FILE *f = fopen(path, "r");
    char line[2048], expr[8192];
    int exprs = 0;

    if (!CHECK(f != NULL))
        return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *k = strstr(line, "expr:"), *v;
        size_t indent;

        if (k == NULL || strspn(line, " -") < (indent = (size_t)(k - line)))
            continue;
        v = (char *)skip_space(k + 5);
        v[strcspn(v, "\n")] = '\0';
        if (*v == '|' || *v == '>') {
            long pos = ftell(f);

            expr[0] = '\0';
            while (fgets(line, sizeof line, f) != NULL && strspn(line, " ") > indent) {
                strncat(expr, line, sizeof expr - strlen(expr) - 1);
                pos = ftell(f);
            }
            fseek(f, pos, SEEK_SET);
        } else if ((*v == '"' || *v == '\'') && strlen(v) >= 2 && v[strlen(v) - 1] == *v) {
            snprintf(expr, sizeof expr, "%.*s", (int)strlen(v) - 2, v + 1);
        } else {
            snprintf(expr, sizeof expr, "%s", v);
        }
        exprs++;
        expr_uses(expr, check_use, c);
    }
    fclose(f);
    return exprs;
}

/* ---- the extractor on its own ------------------------------------------------------------ */

typedef struct collected {
    char names[512];
} collected;

static void collect(const use *u, const char *expr, void *arg)
{
    collected *c = arg;

    (void)expr;
    strncat(c->names, u->name, sizeof c->names - strlen(c->names) - 1);
    for (int i = 0; i < u->nmatchers; i++) {
        char m[400];

        snprintf(m, sizeof m, "{%s%s%s}", u->m[i].label, u->m[i].op, u->m[i].value);
        strncat(c->names, m, sizeof c->names - strlen(c->names) - 1);
    }
    strncat(c->names, " ", sizeof c->names - strlen(c->names) - 1);
}

static void test_extractor(void)
{
    collected c = {{0}};

    expr_uses("histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{q=\"x\", "
              "job=~\"p-(a|b)\"}[5m]))) > 5 and on (job) b_total offset 5m / "
              "sum without (instance) (rate(c:rec[$__rate_interval])) + max(d) by (queue) "
              "unless up{job!=\"z\"} == bool 1e3",
              collect, &c);
    CHECK_STR(c.names, "a_seconds_bucket{q=x}{job=~p-(a|b)} b_total c:rec d up{job!=z} ");
}

static void tests(void)
{
    exported x = {NULL};
    const char *root = getenv("GW_SOURCE_ROOT");
    char path[1024];
    json_error_t jerr;
    json_t *dash;
    checking c = {0};
    int exprs = 0;

    test_extractor();
    if (!CHECK(root != NULL) || !scrape(&x, api.url, "payments-api") ||
        !scrape(&x, relay.url, "payments-relay") || !scrape(&x, worker.url, "payments-worker")) {
        free(x.text);
        return;
    }
    c.x = &x;

    snprintf(path, sizeof path, "%s/docs/observability/paygw-dashboard.json", root);
    c.file = "paygw-dashboard.json";
    dash = json_load_file(path, 0, &jerr);
    if (CHECK(dash != NULL)) {
        dashboard_exprs(dash, &c, &exprs);
        printf("%s: %d queries, %d metric uses, %d not exported\n", c.file, exprs, c.names,
               c.missing);
        CHECK(exprs > 0);
        json_decref(dash);
    } else {
        fprintf(stderr, "%s: %s (line %d)\n", path, jerr.text, jerr.line);
    }

    snprintf(path, sizeof path, "%s/docs/observability/paygw-alerts.yml", root);
    c.file = "paygw-alerts.yml";
    c.names = c.missing = 0;
    exprs = rules_exprs(path, &c);
    printf("%s: %d expressions, %d metric uses, %d not exported\n", c.file, exprs, c.names,
           c.missing);
    CHECK(exprs > 0);
    free(x.text);
}

int main(void)
{
    return tadm_main("observability_metrics", &t, &relay, &worker, &api, NULL, tests);
}
