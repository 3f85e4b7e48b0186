/* worker/settle/bank.h - how the worker settles with a bank: the simulation or an HTTP bank */
#ifndef WORKER_SETTLE_BANK_H
#define WORKER_SETTLE_BANK_H

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
 * A bank. settle() decides every call of @calls (concurrently where it can)
 * and must be idempotent by event_id: the HTTP bank sends it as the
 * idempotency key, because a redelivery calls it again.
 */
typedef struct bank {
    void *impl;
    void (*settle)(void *impl, bank_call *calls, int n);
    void (*free)(void *impl);
} bank;

static inline void bank_settle(const bank *b, bank_call *calls, int n)
{
    for (int i = 0; i < n; i++) {
        calls[i].result = BANK_UNKNOWN;
        calls[i].absent = false;
        calls[i].why[0] = calls[i].reference[0] = '\0';
    }
    if (n > 0)
        b->settle(b->impl, calls, n);
}

static inline void bank_free(bank *b)
{
    if (b != NULL && b->free != NULL)
        b->free(b->impl);
}

#endif
