/* banksim/store.h - executed transfers: an append-only JSON-lines file, read back at start */
#ifndef BANKSIM_STORE_H
#define BANKSIM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/lib/err.h"

#define STORE_ID_MAX      64 /* transfer_id and payment_id: 1..64 of [A-Za-z0-9._:-] */
#define STORE_METHOD_MAX  15
#define STORE_BANK_MAX    15
#define STORE_ACCOUNT_MAX 34

typedef struct store store;

/* One executed transfer: a small value type, copied in and out of the store. */
typedef struct store_transfer {
    int64_t seq; /* 1, 2, ... in execution order; set by store_execute() */
    char transfer_id[STORE_ID_MAX + 1];
    char payment_id[STORE_ID_MAX + 1];
    char method[STORE_METHOD_MAX + 1];
    char currency[4];
    char payee_bank[STORE_BANK_MAX + 1];
    char payee_account[STORE_ACCOUNT_MAX + 1];
    int64_t amount_cents;
    char bank_reference[24]; /* "BSIM-" + 16 hex digits */
} store_transfer;

/*
 * store_open - the store of @path (borrowed; NULL: memory only, lost on exit).
 * An existing file is read back: every line one transfer, in execution order.
 * A torn last line (a crash during a write) is cut off; anything else that does
 * not read back is an error (logged, GW_ERR_INVALID). On GW_OK *@out is owned
 * by the caller (store_close()).
 */
GW_MUSTCHECK gw_err store_open(const char *path, store **out);

/* store_close - write what is queued, close the file and free @s. Accepts NULL. */
void store_close(store *s);

/* store_count - how many transfers were executed. */
size_t store_count(store *s);

/* store_find - copy the transfer @transfer_id into *@out; false when it was never executed. */
bool store_find(store *s, const char *transfer_id, store_transfer *out);

/* What store_submit() calls once a transfer's result is known. */
typedef void (*store_done)(void *arg);

/*
 * store_submit - record *@t as executed, asynchronously (a store with a file
 * only: see store_durable()). The store's writer thread appends every
 * transfer queued since its last write as one group, fsyncs once, and only
 * then sets *@result and calls @done(@arg), from its own thread, once per
 * transfer:
 *   GW_OK            executed now; @t->seq set. It is durable: an answer sent
 *                    after @done survives a crash.
 *   GW_ERR_CONFLICT  the transfer_id was executed before (or earlier in the
 *                    same group): *@t is overwritten with that stored
 *                    transfer, nothing is written.
 *   GW_ERR_RETRY     the file could not be written: nothing is recorded.
 * @t and @result must stay valid until @done. Returns GW_ERR_NOMEM (and never
 * calls @done) when it cannot queue.
 */
GW_MUSTCHECK gw_err store_submit(store *s, store_transfer *t, gw_err *result, store_done done,
                                 void *arg);

/* store_durable - whether @s has a file (and a writer thread for store_submit()). */
bool store_durable(const store *s);

/*
 * store_execute - store_submit() and wait for the result, which it returns.
 * Memory only: at once, under the lock. Safe from any thread.
 */
GW_MUSTCHECK gw_err store_execute(store *s, store_transfer *t);

/*
 * store_list - up to @limit transfers with seq > @after, in execution order,
 * copied into @out (room for @limit). Returns how many; *@more says whether
 * others follow.
 */
size_t store_list(store *s, int64_t after, size_t limit, store_transfer *out, bool *more);

#endif
