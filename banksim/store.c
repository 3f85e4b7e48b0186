/* banksim/store.c - an array in execution order, a hash index by transfer_id, one lock */
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

#include "shared/lib/log.h"

struct store {
    pthread_mutex_t lock;
    int fd;              /* -1: memory only */
    off_t size;          /* bytes of whole lines in the file */
    store_transfer *all; /* owned, n entries; all[i].seq == i + 1 */
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

/* Room for one more transfer, in the array and in the index (kept under half full). */
static gw_err reserve_one(store *s)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        store_transfer *all = realloc(s->all, cap * sizeof *all);

        if (all == NULL)
            return GW_ERR_NOMEM;
        s->all = all;
        s->cap = cap;
    }
    if (2 * (s->n + 1) > s->nbuckets) {
        size_t nb = s->nbuckets ? 2 * s->nbuckets : 512;
        size_t *old = s->index, oldn = s->nbuckets;

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
        if ((err = reserve_one(s)) != GW_OK)
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

gw_err store_open(const char *path, store **out)
{
    store *s = calloc(1, sizeof *s);
    gw_err err = GW_OK;

    if (s == NULL)
        return GW_ERR_NOMEM;
    pthread_mutex_init(&s->lock, NULL);
    s->fd = -1;
    if ((err = reserve_one(s)) != GW_OK)
        return GW_BUILT(err, s, store_close, out);
    if (path == NULL)
        log_warn("store_memory_only", "reason=\"BANKSIM_STORE unset: executed transfers are "
                                      "forgotten on exit\"");
    else if ((err = load_file(s, path)) == GW_OK)
        log_info("store_loaded", "path=%s transfers=%zu", path, s->n);
    return GW_BUILT(err, s, store_close, out);
}

void store_close(store *s)
{
    if (s == NULL)
        return;
    if (s->fd >= 0)
        close(s->fd);
    pthread_mutex_destroy(&s->lock);
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

/* The line of @t with its '\n', a new string (free()); NULL when out of memory. */
static char *transfer_line(const store_transfer *t)
{
    json_t *o =
        json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:s}", "seq", (json_int_t)t->seq, "transfer_id",
                  t->transfer_id, "payment_id", t->payment_id, "method", t->method, "currency",
                  t->currency, "payee_bank", t->payee_bank, "payee_account", t->payee_account,
                  "amount_cents", (json_int_t)t->amount_cents, "bank_reference", t->bank_reference);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    char *line = NULL;

    json_decref(o);
    if (text != NULL && (line = malloc(strlen(text) + 2)) != NULL)
        sprintf(line, "%s\n", text);
    free(text);
    return line;
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

gw_err store_execute(store *s, store_transfer *t)
{
    gw_err err = GW_OK;
    char *line = NULL;
    size_t slot;

    pthread_mutex_lock(&s->lock);
    slot = slot_of(s, t->transfer_id);
    if (s->index[slot] != 0) {
        *t = s->all[s->index[slot] - 1];
        err = GW_ERR_CONFLICT;
        goto cleanup;
    }
    if ((err = reserve_one(s)) != GW_OK)
        goto cleanup;
    slot = slot_of(s, t->transfer_id); /* the index may have grown */
    t->seq = (int64_t)s->n + 1;
    if (s->fd >= 0) {
        if ((line = transfer_line(t)) == NULL) {
            err = GW_ERR_NOMEM;
            goto cleanup;
        }
        /* on disk before in memory: nothing is answered as executed that a restart forgets */
        if ((err = append_durably(s, line, strlen(line))) != GW_OK)
            goto cleanup;
    }
    add_transfer(s, slot, t);
cleanup:
    pthread_mutex_unlock(&s->lock);
    free(line);
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
