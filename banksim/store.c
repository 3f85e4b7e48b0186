/* banksim/store.c - an array in execution order, a hash index by transfer_id, one lock, and a
 * writer thread that commits in groups: one write and one fsync for every transfer that queued
 * while the previous group was written */
#include "banksim/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"

/* One submitted transfer, until its group is written: owned by the store. */
typedef struct pending {
    store_transfer *t; /* the submitter's: seq set by the writer, or the stored one copied in */
    gw_err *result;    /* the submitter's */
    store_done done;   /* called by the writer once *result is set */
    void *arg;
    char *tail;                 /* its line without the head {"seq":N, (owned) */
    const struct pending *lead; /* the same key earlier in its group: that one's fate is ours */
    bool write;                 /* it has a line in the group */
    struct pending *next;
} pending;

struct store {
    pthread_mutex_t lock;
    pthread_cond_t work; /* something was queued, or the store closes */
    pending *queue;      /* submitted, not yet taken by the writer, in arrival order */
    pending **queue_end;
    bool closing;
    pthread_t writer; /* only with a file */
    bool has_writer;
    char *buf; /* the group's lines: the writer's alone */
    size_t buf_cap;
    int fd;              /* -1: memory only */
    off_t size;          /* bytes of whole lines in the file */
    store_transfer *all; /* owned, n entries; all[i].seq == i + 1; only the writer adds */
    size_t n, cap;
    size_t *index; /* owned, nbuckets slots: position in all + 1, 0 when empty */
    size_t nbuckets;
};

static size_t hash_id(const char *s)
{
    size_t h = 1469598103934665603u; /* FNV-1a */

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* The slot of @id in the index: where it is, or the empty slot where it would go. */
static size_t slot_of(const store *s, const char *id)
{
    size_t mask = s->nbuckets - 1, i = hash_id(id) & mask;

    while (s->index[i] != 0 && strcmp(s->all[s->index[i] - 1].transfer_id, id) != 0)
        i = (i + 1) & mask;
    return i;
}

/* Room for @k more transfers, in the array and in the index (kept under half full). */
static gw_err reserve(store *s, size_t k)
{
    if (s->n + k > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;

        while (cap < s->n + k)
            cap *= 2;
        store_transfer *all = realloc(s->all, cap * sizeof *all);

        if (all == NULL)
            return GW_ERR_NOMEM;
        s->all = all;
        s->cap = cap;
    }
    if (2 * (s->n + k) > s->nbuckets) {
        size_t nb = s->nbuckets ? 2 * s->nbuckets : 512;
        size_t *old = s->index, oldn = s->nbuckets;

        while (2 * (s->n + k) > nb)
            nb *= 2;
        if ((s->index = calloc(nb, sizeof *s->index)) == NULL) {
            s->index = old;
            return GW_ERR_NOMEM;
        }
        s->nbuckets = nb;
        for (size_t i = 0; i < oldn; i++)
            if (old[i] != 0)
                s->index[slot_of(s, s->all[old[i] - 1].transfer_id)] = old[i];
        free(old);
    }
    return GW_OK;
}

/* Append *@t (its slot in the index is @slot, from slot_of()) to memory. */
static void add_transfer(store *s, size_t slot, const store_transfer *t)
{
    s->all[s->n] = *t;
    s->index[slot] = ++s->n;
}

static bool copy_str(const json_t *o, const char *key, char *out, size_t size, bool need)
{
    const char *v = json_string_value(json_object_get(o, key)); /* borrowed from o */

    if (v == NULL) {
        out[0] = '\0';
        return !need;
    }
    return (size_t)snprintf(out, size, "%s", v) < size && (!need || v[0] != '\0');
}

/* One line of the file into *@t; false when it is not a transfer. */
static bool transfer_from_line(const char *line, size_t len, store_transfer *t)
{
    json_t *o = json_loadb(line, len, 0, NULL);
    json_t *seq, *amount;
    bool ok;

    memset(t, 0, sizeof *t);
    seq = json_object_get(o, "seq");             /* borrowed */
    amount = json_object_get(o, "amount_cents"); /* borrowed */
    ok = json_is_object(o) && json_is_integer(seq) && json_is_integer(amount) &&
         copy_str(o, "transfer_id", t->transfer_id, sizeof t->transfer_id, true) &&
         copy_str(o, "payment_id", t->payment_id, sizeof t->payment_id, true) &&
         copy_str(o, "method", t->method, sizeof t->method, false) &&
         copy_str(o, "currency", t->currency, sizeof t->currency, false) &&
         copy_str(o, "payee_bank", t->payee_bank, sizeof t->payee_bank, false) &&
         copy_str(o, "payee_account", t->payee_account, sizeof t->payee_account, false) &&
         copy_str(o, "bank_reference", t->bank_reference, sizeof t->bank_reference, true);
    if (ok) {
        t->seq = (int64_t)json_integer_value(seq);
        t->amount_cents = (int64_t)json_integer_value(amount);
    }
    json_decref(o);
    return ok;
}

static gw_err append_durably(store *s, const char *buf, size_t len);

/* fsync the folder of @path, so that a file just created survives a crash too. */
static bool sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    bool ok;
    int fd;

    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if ((size_t)snprintf(dir, sizeof dir, "%.*s", (int)(slash - path + 1), path) >= sizeof dir)
        return false;
    if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return false;
    ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

/* Read @path back into @s and leave s->fd open for appends after the last whole line. */
static gw_err load_file(store *s, const char *path)
{
    gw_err err = GW_OK;
    FILE *f = NULL;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;

    s->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (s->fd < 0 || (f = fdopen(dup(s->fd), "r")) == NULL || !sync_dir(path)) {
        log_error("store_open_failed", "path=%s error=\"%s\"", path, strerror(errno));
        if (f != NULL)
            fclose(f);
        return GW_ERR_INVALID;
    }
    while ((got = getline(&line, &cap, f)) > 0) {
        store_transfer t;
        bool whole = line[got - 1] == '\n';

        lineno++;
        if (!transfer_from_line(line, (size_t)got, &t) || t.seq != (int64_t)s->n + 1) {
            if (!whole) { /* only the last line lacks '\n': torn by a crash during its write */
                log_warn("store_torn_line", "path=%s line=%ld action=cut", path, lineno);
                break;
            }
            log_error("store_corrupt", "path=%s line=%ld", path, lineno);
            err = GW_ERR_INVALID;
            goto cleanup;
        }
        if ((err = reserve(s, 1)) != GW_OK)
            goto cleanup;
        size_t slot = slot_of(s, t.transfer_id);
        if (s->index[slot] != 0) {
            log_error("store_corrupt", "path=%s line=%ld transfer_id=%s duplicate=true", path,
                      lineno, t.transfer_id);
            err = GW_ERR_INVALID;
            goto cleanup;
        }
        add_transfer(s, slot, &t);
        s->size += got;
        if (!whole && (err = append_durably(s, "\n", 1)) != GW_OK) /* end it before appending */
            goto cleanup;
    }
    if (ftruncate(s->fd, s->size) != 0) { /* cut a torn last line */
        log_error("store_open_failed", "path=%s error=\"%s\"", path, strerror(errno));
        err = GW_ERR_INVALID;
    }
cleanup:
    free(line);
    fclose(f);
    return err;
}

static void *writer_main(void *arg);

gw_err store_open(const char *path, store **out)
{
    store *s = calloc(1, sizeof *s);
    gw_err err = GW_OK;

    if (s == NULL)
        return GW_ERR_NOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    s->queue_end = &s->queue;
    s->fd = -1;
    if ((err = reserve(s, 1)) != GW_OK)
        return GW_BUILT(err, s, store_close, out);
    if (path == NULL) {
        log_warn("store_memory_only", "reason=\"BANKSIM_STORE unset: executed transfers are "
                                      "forgotten on exit\"");
    } else if ((err = load_file(s, path)) == GW_OK) {
        log_info("store_loaded", "path=%s transfers=%zu", path, s->n);
        if (pthread_create(&s->writer, NULL, writer_main, s) != 0)
            err = GW_ERR_NOMEM;
        s->has_writer = err == GW_OK;
    }
    return GW_BUILT(err, s, store_close, out);
}

void store_close(store *s)
{
    if (s == NULL)
        return;
    if (s->has_writer) { /* it writes what is queued, then ends */
        pthread_mutex_lock(&s->lock);
        s->closing = true;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->writer, NULL);
    }
    if (s->fd >= 0)
        close(s->fd);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    free(s->buf);
    free(s->all);
    free(s->index);
    free(s);
}

size_t store_count(store *s)
{
    size_t n;

    pthread_mutex_lock(&s->lock);
    n = s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

bool store_find(store *s, const char *transfer_id, store_transfer *out)
{
    size_t at;

    pthread_mutex_lock(&s->lock);
    at = s->index[slot_of(s, transfer_id)];
    if (at != 0)
        *out = s->all[at - 1];
    pthread_mutex_unlock(&s->lock);
    return at != 0;
}

/*
 * The line of @t without its seq, a new string (free()); NULL when out of memory. The line
 * on disk is {"seq":N, followed by this text from its second character on, and '\n'.
 */
static char *transfer_tail(const store_transfer *t)
{
    const char *fields[] = {t->transfer_id, t->payment_id,    t->method,        t->currency,
                            t->payee_bank,  t->payee_account, t->bank_reference};
    bool plain = true;
    json_t *o;
    char *text;

    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && plain; i++)
        plain = json_plain(fields[i]);
    if (plain) {                      /* the usual case: the fields passed the server's charsets */
        size_t cap = sizeof *t + 200; /* every field, and the names around them */
        int n;

        if ((text = malloc(cap)) == NULL)
            return NULL;
        n = snprintf(text, cap,
                     "{\"transfer_id\":\"%s\",\"payment_id\":\"%s\",\"method\":\"%s\","
                     "\"currency\":\"%s\",\"payee_bank\":\"%s\",\"payee_account\":\"%s\","
                     "\"amount_cents\":%" PRId64 ",\"bank_reference\":\"%s\"}",
                     t->transfer_id, t->payment_id, t->method, t->currency, t->payee_bank,
                     t->payee_account, t->amount_cents, t->bank_reference);
        if (n > 0 && (size_t)n < cap)
            return text;
        free(text);
    }
    o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:s}", "transfer_id", t->transfer_id, "payment_id",
                  t->payment_id, "method", t->method, "currency", t->currency, "payee_bank",
                  t->payee_bank, "payee_account", t->payee_account, "amount_cents",
                  (json_int_t)t->amount_cents, "bank_reference", t->bank_reference);
    text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return text;
}

/* Write @len bytes of @buf at the end of the file and fsync; on failure cut the file back. */
static gw_err append_durably(store *s, const char *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t w = write(s->fd, buf + done, len - done);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto failed;
        done += (size_t)w;
    }
    if (fsync(s->fd) != 0)
        goto failed;
    s->size += (off_t)len;
    return GW_OK;
failed:
    log_error("store_write_failed", "error=\"%s\"", strerror(errno));
    if (ftruncate(s->fd, s->size) != 0) /* a torn line would hide every later one */
        log_error("store_truncate_failed", "error=\"%s\"", strerror(errno));
    return GW_ERR_RETRY;
}

/* The lines of the group @g that write into s->buf; their length, 0 without memory. */
static size_t group_lines(store *s, const pending *g)
{
    size_t len = 0;

    for (const pending *p = g; p != NULL; p = p->next) {
        size_t need = len + strlen(p->tail) + 32; /* {"seq":<20 digits>, and '\n' */

        if (!p->write)
            continue;
        if (need > s->buf_cap) {
            size_t cap = s->buf_cap ? 2 * s->buf_cap : 65536;
            char *nb;

            while (cap < need)
                cap *= 2;
            if ((nb = realloc(s->buf, cap)) == NULL)
                return 0;
            s->buf = nb;
            s->buf_cap = cap;
        }
        len += (size_t)sprintf(s->buf + len, "{\"seq\":%" PRId64 ",%s\n", p->t->seq, p->tail + 1);
    }
    return len;
}

/*
 * Decide the group @g under the lock: a key executed before is a conflict at once, a key
 * that came earlier in the group follows that one, every other one gets the next seq. Returns
 * how many lines the group writes.
 */
static size_t group_plan(store *s, pending *g)
{
    size_t k = 0;

    for (pending *p = g; p != NULL; p = p->next) {
        size_t at = s->index[slot_of(s, p->t->transfer_id)];

        if (at != 0) {
            *p->t = s->all[at - 1];
            *p->result = GW_ERR_CONFLICT;
            continue;
        }
        for (const pending *q = g; q != p && p->lead == NULL; q = q->next)
            if (q->write && strcmp(q->t->transfer_id, p->t->transfer_id) == 0)
                p->lead = q;
        if (p->lead == NULL) {
            p->write = true;
            p->t->seq = (int64_t)(s->n + ++k);
        }
    }
    return k;
}

/* The writer thread: each group is one write and one fsync, then its callbacks. */
static void *writer_main(void *arg)
{
    store *s = arg;

    pthread_mutex_lock(&s->lock);
    for (;;) {
        pending *g;
        size_t k, len;
        gw_err err;

        while (s->queue == NULL && !s->closing)
            pthread_cond_wait(&s->work, &s->lock);
        if ((g = s->queue) == NULL)
            break; /* closing, and nothing left */
        s->queue = NULL;
        s->queue_end = &s->queue;
        k = group_plan(s, g);
        err = reserve(s, k); /* before the write: a durable line always finds room in memory */
        pthread_mutex_unlock(&s->lock);
        if (err == GW_OK && k > 0)
            err = (len = group_lines(s, g)) == 0 ? GW_ERR_NOMEM : append_durably(s, s->buf, len);
        pthread_mutex_lock(&s->lock);
        for (pending *p = g; p != NULL; p = p->next) {
            if (p->write) {
                *p->result = err;
                if (err == GW_OK) /* on disk before in memory: nothing answered is forgotten */
                    add_transfer(s, slot_of(s, p->t->transfer_id), p->t);
            } else if (p->lead != NULL) {
                *p->result = err == GW_OK ? GW_ERR_CONFLICT : err;
                if (err == GW_OK)
                    *p->t = *p->lead->t;
            }
        }
        pthread_mutex_unlock(&s->lock);
        /* outside the lock: a callback may hand its request back to the HTTP server */
        for (pending *p = g, *next; p != NULL; p = next) {
            next = p->next;
            p->done(p->arg);
            free(p->tail);
            free(p);
        }
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

bool store_durable(const store *s)
{
    return s->has_writer;
}

gw_err store_submit(store *s, store_transfer *t, gw_err *result, store_done done, void *arg)
{
    pending *p = calloc(1, sizeof *p);

    /* the text of its line here, on the submitter's thread: the writer only copies it */
    if (p == NULL || (p->tail = transfer_tail(t)) == NULL) {
        free(p);
        return GW_ERR_NOMEM;
    }
    p->t = t;
    p->result = result;
    p->done = done;
    p->arg = arg;
    pthread_mutex_lock(&s->lock);
    *s->queue_end = p;
    s->queue_end = &p->next;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return GW_OK;
}

/* store_execute waiting for its group. */
typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
} waiter;

static void wake_waiter(void *arg)
{
    waiter *w = arg;

    pthread_mutex_lock(&w->lock);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

gw_err store_execute(store *s, store_transfer *t)
{
    waiter w = {.done = false};
    gw_err err = GW_OK, result = GW_OK;
    size_t at;

    if (s->has_writer) {
        pthread_mutex_init(&w.lock, NULL);
        pthread_cond_init(&w.cond, NULL);
        if ((err = store_submit(s, t, &result, wake_waiter, &w)) == GW_OK) {
            pthread_mutex_lock(&w.lock);
            while (!w.done)
                pthread_cond_wait(&w.cond, &w.lock);
            pthread_mutex_unlock(&w.lock);
            err = result;
        }
        pthread_cond_destroy(&w.cond);
        pthread_mutex_destroy(&w.lock);
        return err;
    }
    pthread_mutex_lock(&s->lock); /* memory only */
    if ((at = s->index[slot_of(s, t->transfer_id)]) != 0) {
        *t = s->all[at - 1];
        err = GW_ERR_CONFLICT;
    } else if ((err = reserve(s, 1)) == GW_OK) {
        t->seq = (int64_t)s->n + 1;
        add_transfer(s, slot_of(s, t->transfer_id), t);
    }
    pthread_mutex_unlock(&s->lock);
    return err;
}

size_t store_list(store *s, int64_t after, size_t limit, store_transfer *out, bool *more)
{
    size_t from, n = 0;

    pthread_mutex_lock(&s->lock);
    from = after < 0 ? 0 : (size_t)after; /* seq k sits at all[k - 1] */
    for (size_t i = from; i < s->n && n < limit; i++)
        out[n++] = s->all[i];
    *more = from + n < s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}
