/* shared/failpoint.c - a fixed table of armed points, read-only after init */
#include "shared/failpoint.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shared/lib/items.h"
#include "shared/lib/log.h"

enum fp_action { FP_OFF, FP_EXIT, FP_SLEEP, FP_ERROR };

static const char *const fp_names[] = {
    "api.before_commit",    "api.after_commit",    "relay.after_publish",
    "worker.before_commit", "worker.after_commit", "worker.after_retry_publish",
    "admin.after_commit",   "relay.before_commit", "worker.after_bank_call",
};
#define FP_COUNT (sizeof fp_names / sizeof fp_names[0])

struct fp {
    enum fp_action action;
    long arg; /* exit: the hit that exits; sleep: milliseconds */
    atomic_long hits;
};

static struct fp fp_table[FP_COUNT];
static bool fp_armed; /* written once before threads start */

static int fp_index(const char *name, size_t len)
{
    for (size_t i = 0; i < FP_COUNT; i++)
        if (strlen(fp_names[i]) == len && memcmp(fp_names[i], name, len) == 0)
            return (int)i;
    return -1;
}

static bool parse_long(const char *s, long min, long *out)
{
    char *end;

    errno = 0;
    *out = strtol(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && *out >= min;
}

/* Parse one "name=action" into @out; false with @why on error. */
static bool parse_one(char *item, int *idx, struct fp *out, char *why, size_t wlen)
{
    char *eq = strchr(item, '=');

    if (eq == NULL) {
        snprintf(why, wlen, "\"%s\" is not name=action", item);
        return false;
    }
    *idx = fp_index(item, (size_t)(eq - item));
    if (*idx < 0) {
        snprintf(why, wlen, "unknown failpoint \"%.*s\"", (int)(eq - item), item);
        return false;
    }
    eq++;
    out->arg = 1;
    if (strcmp(eq, "exit") == 0) {
        out->action = FP_EXIT;
    } else if (strncmp(eq, "exit@", 5) == 0 && parse_long(eq + 5, 1, &out->arg)) {
        out->action = FP_EXIT;
    } else if (strncmp(eq, "sleep=", 6) == 0 && parse_long(eq + 6, 0, &out->arg) &&
               out->arg <= 600000) {
        out->action = FP_SLEEP;
    } else if (strcmp(eq, "error") == 0) {
        out->action = FP_ERROR;
    } else {
        snprintf(why, wlen, "bad action \"%s\" (exit, exit@N, sleep=MS, error)", eq);
        return false;
    }
    return true;
}

static bool parse_spec(const char *spec, bool arm, char *why, size_t wlen)
{
    char item[128];
    items it;
    int got;

    items_init(&it, spec, ';');
    while ((got = items_next(&it, item, sizeof item)) != 0) {
        struct fp one = {0};
        int idx;

        if (got < 0) {
            snprintf(why, wlen, "entry too long");
            return false;
        }
        if (!parse_one(item, &idx, &one, why, wlen))
            return false;
        if (arm) {
            fp_table[idx].action = one.action;
            fp_table[idx].arg = one.arg;
            fp_armed = true;
        }
    }
    return true;
}

bool failpoint_validate(const char *spec, char *why, size_t len)
{
    return parse_spec(spec, false, why, len);
}

void failpoint_init(const char *spec)
{
    char why[160];

    memset(fp_table, 0, sizeof fp_table);
    fp_armed = false;
    if (spec != NULL && parse_spec(spec, true, why, sizeof why))
        log_warn("failpoints_armed", "spec=\"%s\"", spec);
}

gw_err failpoint_hit(const char *name)
{
    struct fp *fp;
    long n;
    int idx;

    if (!fp_armed)
        return GW_OK;
    idx = fp_index(name, strlen(name));
    if (idx < 0 || fp_table[idx].action == FP_OFF)
        return GW_OK;
    fp = &fp_table[idx];
    n = atomic_fetch_add(&fp->hits, 1) + 1;
    switch (fp->action) {
    case FP_EXIT:
        if (n == fp->arg) {
            log_warn("failpoint_exit", "point=%s hit=%ld", name, n);
            _exit(137);
        }
        return GW_OK;
    case FP_SLEEP: {
        struct timespec ts = {fp->arg / 1000, (fp->arg % 1000) * 1000000L};
        log_info("failpoint_sleep", "point=%s ms=%ld", name, fp->arg);
        nanosleep(&ts, NULL);
        return GW_OK;
    }
    case FP_ERROR:
        log_warn("failpoint_error", "point=%s hit=%ld", name, n);
        return GW_ERR_DB;
    case FP_OFF:
        break;
    }
    return GW_OK;
}
