/* shared/payment.h - a payment decision: validation shared by the API and the worker */
#ifndef SHARED_PAYMENT_H
#define SHARED_PAYMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "shared/lib/err.h"

#define PAYMENT_ID_MAX     64
#define PAYMENT_AMOUNT_MAX 10000000000000LL /* 10^13 cents */
#define PAYMENT_MAX_ERRORS 32
#define PAYMENT_NAME_MAX   140

/* A validated decision; a small public value type. Strings are NUL-terminated. */
typedef struct payment {
    char event_id[PAYMENT_ID_MAX + 1];
    char payment_id[PAYMENT_ID_MAX + 1];
    char method[8];   /* pix | ted | card */
    char decision[9]; /* approved | refused */
    int64_t amount_cents;
    char currency[4];
    char payee_bank[4];
    char payee_account[21];
    char decided_at[40]; /* RFC 3339 as given, "" when absent */
} payment;

/* One validation problem: an RFC 6901 pointer and a human sentence. */
typedef struct field_error {
    char pointer[160];
    char detail[160];
} field_error;

typedef struct field_errors {
    int n;
    field_error e[PAYMENT_MAX_ERRORS];
} field_errors;

/*
 * payment_validate - check @root (borrowed) against openapi/payments.yaml and fill
 * @out. Every problem is appended to @errs (not only the first). Returns GW_OK,
 * or GW_ERR_INVALID when @errs->n > 0.
 */
GW_MUSTCHECK gw_err payment_validate(const json_t *root, payment *out, field_errors *errs);

/* payment_routing_key - "payment.<method>.<decision>" into @buf. */
void payment_routing_key(const payment *p, char *buf, size_t len);

/* payment_id_valid - 1..64 chars of [A-Za-z0-9._:-]. */
bool payment_id_valid(const char *s, size_t len);

/* payment_rfc3339_valid - a full RFC 3339 date-time with a real calendar date. */
bool payment_rfc3339_valid(const char *s);

#endif
