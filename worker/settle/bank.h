/* worker/settle/bank.h - how the worker settles with a bank; the simulation is one implementation
 */
#ifndef WORKER_SETTLE_BANK_H
#define WORKER_SETTLE_BANK_H

#include <stddef.h>

#include "shared/payment.h"

typedef enum bank_result {
    BANK_OK,        /* the bank did it */
    BANK_TRANSIENT, /* not now: retry later */
    BANK_PERMANENT, /* never: dead-letter */
} bank_result;

/*
 * A bank. settle() must be idempotent by @p->event_id: a real PSP client
 * sends it as the idempotency key, because a redelivery calls it again.
 * @why (size @len) gets a short reason for anything but BANK_OK.
 */
typedef struct bank {
    void *impl;
    bank_result (*settle)(void *impl, const payment *p, int attempt, char *why, size_t len);
    void (*free)(void *impl);
} bank;

static inline bank_result bank_settle(const bank *b, const payment *p, int attempt, char *why,
                                      size_t len)
{
    return b->settle(b->impl, p, attempt, why, len);
}

static inline void bank_free(bank *b)
{
    if (b != NULL && b->free != NULL)
        b->free(b->impl);
}

#endif
