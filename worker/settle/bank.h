/* worker/settle/bank.h - how the worker settles with a bank: the simulation or an HTTP bank */
#ifndef WORKER_SETTLE_BANK_H
#define WORKER_SETTLE_BANK_H

#include <stdbool.h>
#include <stddef.h>

#include "shared/payment.h"

typedef enum bank_result {
    BANK_OK,        /* the bank executed it */
    BANK_TRANSIENT, /* not now: retry later */
    BANK_PERMANENT, /* never: dead-letter */
    BANK_UNKNOWN,   /* no answer we can trust: executed or not, nobody knows yet (never DLQ) */
} bank_result;

#define BANK_REFERENCE_MAX 129 /* openapi/payments.yaml: bank_reference maxLength 128 */
#define BANK_WHY_MAX       240

/* One payment to settle: the caller fills @p and @attempt, the bank the rest. */
typedef struct bank_call {
    const payment *p; /* borrowed */
    int attempt;
    bank_result result;
    bool absent; /* BANK_TRANSIENT because the bank said it has no such transfer (a lookup's 404) */
    char why[BANK_WHY_MAX];             /* anything but BANK_OK: a short reason */
    char reference[BANK_REFERENCE_MAX]; /* BANK_OK from an HTTP bank: its reference; else "" */
} bank_call;

/*
 * A bank. send() starts deciding every call of @calls and must be idempotent
 * by event_id: the HTTP bank sends it as the idempotency key, because a
 * redelivery calls it again. A bank that answers over the network decides
 * them in finish(), so the worker can commit the batch before while they are
 * in flight: two batches at most, in slots 0 and 1. Without finish(), send()
 * has decided them already.
 */
#define BANK_SLOTS 2

typedef struct bank {
    void *impl;
    void (*send)(void *impl, int slot, bank_call *calls, int n);
    void (*finish)(void *impl, int slot);  /* NULL: send() decides */
    void (*abandon)(void *impl, int slot); /* stop waiting for a slot's answers; NULL: nothing */
    void (*free)(void *impl);
} bank;

static inline bool bank_pipelined(const bank *b)
{
    return b->finish != NULL;
}

/* bank_send - start deciding @calls in @slot; every result is BANK_UNKNOWN until decided. */
static inline void bank_send(const bank *b, int slot, bank_call *calls, int n)
{
    for (int i = 0; i < n; i++) {
        calls[i].result = BANK_UNKNOWN;
        calls[i].absent = false;
        calls[i].why[0] = calls[i].reference[0] = '\0';
    }
    if (n > 0)
        b->send(b->impl, slot, calls, n);
}

/* bank_finish - every call sent in @slot decided (n: what bank_send() was given). */
static inline void bank_finish(const bank *b, int slot, int n)
{
    if (n > 0 && b->finish != NULL)
        b->finish(b->impl, slot);
}

/* bank_abandon - the slot's calls will not be committed: their answers no longer matter. A
 * transfer the bank executes all the same is found again by its key at the redelivery. */
static inline void bank_abandon(const bank *b, int slot, int n)
{
    if (n > 0 && b->abandon != NULL)
        b->abandon(b->impl, slot);
}

/* bank_settle - send and wait: every call of @calls decided on return. */
static inline void bank_settle(const bank *b, bank_call *calls, int n)
{
    bank_send(b, 0, calls, n);
    bank_finish(b, 0, n);
}

static inline void bank_free(bank *b)
{
    if (b != NULL && b->free != NULL)
        b->free(b->impl);
}

#endif
