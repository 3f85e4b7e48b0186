/* shared/lib/metrics.h - counters, gauges and histograms in Prometheus text format */
#ifndef SHARED_LIB_METRICS_H
#define SHARED_LIB_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "shared/lib/err.h"

typedef struct metrics metrics;
typedef struct metric metric;

/* metrics_new - an empty registry, owned by the caller (metrics_free()). */
metrics *metrics_new(void);
void metrics_free(metrics *m); /* accepts NULL */

/*
 * metrics_counter / metrics_gauge / metrics_histogram - register a series.
 * @name and @help are borrowed (string literals); @labels ("status=\"422\"",
 * or NULL) is copied. The returned series is owned by the registry and lives
 * as long as it. Register before threads start; updates are lock-free.
 * Histogram @bounds (seconds, ascending, at most 16) are copied.
 */
metric *metrics_counter(metrics *m, const char *name, const char *labels, const char *help);
metric *metrics_gauge(metrics *m, const char *name, const char *labels, const char *help);
metric *metrics_histogram(metrics *m, const char *name, const char *labels, const char *help,
                          const double *bounds, size_t n);

void metrics_add(metric *c, uint64_t n);         /* counter */
void metrics_set(metric *g, double v);           /* gauge */
void metrics_observe(metric *h, double seconds); /* histogram */
uint64_t metrics_value(const metric *c);         /* counter value, for tests and logs */

/* Latency buckets in seconds, 1 ms .. 30 s. */
extern const double metrics_latency_bounds[];
extern const size_t metrics_latency_nbounds;
/* Batch-size buckets, 1 .. 1000 items. */
extern const double metrics_batch_bounds[];
extern const size_t metrics_batch_nbounds;

/* metrics_render - the exposition text, new and owned by the caller (free()); NULL on OOM. */
char *metrics_render(const metrics *m, size_t *len);

#endif
