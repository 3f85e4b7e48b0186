/* shared/lib/metrics.c - a small append-only registry of atomic series */
#include "shared/lib/metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BOUNDS 16

enum metric_kind { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM };

struct metric {
    enum metric_kind kind;
    const char *name; /* borrowed literal */
    const char *help; /* borrowed literal */
    char *labels;     /* owned, "" when none */
    atomic_uint_fast64_t count;
    _Atomic double gauge;
    _Atomic double sum;
    double bounds[MAX_BOUNDS];
    size_t nbounds;
    atomic_uint_fast64_t buckets[MAX_BOUNDS]; /* per bucket, cumulated when rendered */
    metric *next;
};

struct metrics {
    metric *head, *tail;
};

const double metrics_latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                         0.25,  0.5,    1,     2.5,  5,     10,   30};
const size_t metrics_latency_nbounds = sizeof metrics_latency_bounds / sizeof(double);

const double metrics_batch_bounds[] = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000};
const size_t metrics_batch_nbounds = sizeof metrics_batch_bounds / sizeof(double);

metrics *metrics_new(void)
{
    return calloc(1, sizeof(metrics));
}

void metrics_free(metrics *m)
{
    metric *s, *next;

    if (m == NULL)
        return;
    for (s = m->head; s != NULL; s = next) {
        next = s->next;
        free(s->labels);
        free(s);
    }
    free(m);
}

static metric *add_series(metrics *m, enum metric_kind kind, const char *name, const char *labels,
                          const char *help)
{
    metric *s = calloc(1, sizeof *s);

    if (s == NULL)
        abort(); /* registration happens at start-up: no memory there is fatal */
    s->kind = kind;
    s->name = name;
    s->help = help;
    s->labels = strdup(labels ? labels : "");
    if (s->labels == NULL)
        abort();
    if (m->tail)
        m->tail->next = s;
    else
        m->head = s;
    m->tail = s;
    return s;
}

metric *metrics_counter(metrics *m, const char *name, const char *labels, const char *help)
{
    return add_series(m, KIND_COUNTER, name, labels, help);
}

metric *metrics_gauge(metrics *m, const char *name, const char *labels, const char *help)
{
    return add_series(m, KIND_GAUGE, name, labels, help);
}

metric *metrics_histogram(metrics *m, const char *name, const char *labels, const char *help,
                          const double *bounds, size_t n)
{
    metric *s = add_series(m, KIND_HISTOGRAM, name, labels, help);

    s->nbounds = n < MAX_BOUNDS ? n : MAX_BOUNDS;
    memcpy(s->bounds, bounds, s->nbounds * sizeof *bounds);
    return s;
}

void metrics_add(metric *c, uint64_t n)
{
    atomic_fetch_add_explicit(&c->count, n, memory_order_relaxed);
}

void metrics_set(metric *g, double v)
{
    atomic_store_explicit(&g->gauge, v, memory_order_relaxed);
}

void metrics_observe(metric *h, double v)
{
    double old = atomic_load(&h->sum);
    size_t i = 0;

    while (i < h->nbounds && v > h->bounds[i])
        i++;
    if (i < h->nbounds)
        atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    while (!atomic_compare_exchange_weak(&h->sum, &old, old + v))
        ; /* no atomic add for doubles */
}

uint64_t metrics_value(const metric *c)
{
    return atomic_load_explicit(&c->count, memory_order_relaxed);
}

/* A growable text buffer for rendering only. */
typedef struct text {
    char *p;
    size_t len, cap;
    bool oom;
} text;

static void text_printf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_printf(text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        char *np = realloc(t->p, t->cap * 2 + (size_t)n);
        if (np == NULL) {
            t->oom = true;
            return;
        }
        t->p = np;
        t->cap = t->cap * 2 + (size_t)n;
    }
}

static void render_series(text *t, const metric *s)
{
    const char *sep = s->labels[0] ? "," : "";
    uint64_t cum = 0;

    switch (s->kind) {
    case KIND_COUNTER:
        text_printf(t, "%s%s%s%s %llu\n", s->name, s->labels[0] ? "{" : "", s->labels,
                    s->labels[0] ? "}" : "", (unsigned long long)metrics_value(s));
        break;
    case KIND_GAUGE:
        text_printf(t, "%s%s%s%s %.17g\n", s->name, s->labels[0] ? "{" : "", s->labels,
                    s->labels[0] ? "}" : "", atomic_load(&s->gauge));
        break;
    case KIND_HISTOGRAM:
        for (size_t i = 0; i < s->nbounds; i++) {
            cum += atomic_load(&s->buckets[i]);
            text_printf(t, "%s_bucket{%s%sle=\"%g\"} %llu\n", s->name, s->labels, sep, s->bounds[i],
                        (unsigned long long)cum);
        }
        text_printf(t, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", s->name, s->labels, sep,
                    (unsigned long long)metrics_value(s));
        text_printf(t, "%s_sum%s%s%s %.9g\n", s->name, s->labels[0] ? "{" : "", s->labels,
                    s->labels[0] ? "}" : "", atomic_load(&s->sum));
        text_printf(t, "%s_count%s%s%s %llu\n", s->name, s->labels[0] ? "{" : "", s->labels,
                    s->labels[0] ? "}" : "", (unsigned long long)metrics_value(s));
        break;
    }
}

char *metrics_render(const metrics *m, size_t *len)
{
    static const char *const kinds[] = {"counter", "gauge", "histogram"};
    text t = {malloc(4096), 0, 4096, false};

    if (t.p == NULL)
        return NULL;
    t.p[0] = '\0';
    /* one HELP/TYPE per family, its series together, in registration order */
    for (const metric *s = m->head; s != NULL; s = s->next) {
        bool seen = false;
        for (const metric *p = m->head; p != s && !seen; p = p->next)
            seen = strcmp(p->name, s->name) == 0;
        if (seen)
            continue;
        text_printf(&t, "# HELP %s %s\n# TYPE %s %s\n", s->name, s->help, s->name, kinds[s->kind]);
        for (const metric *f = s; f != NULL; f = f->next)
            if (strcmp(f->name, s->name) == 0)
                render_series(&t, f);
    }
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    *len = t.len;
    return t.p;
}
