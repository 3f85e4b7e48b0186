/* tests/fuzz/fuzz_payment.c - request bodies through the strict parser, validator and canonicalizer
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shared/lib/canon.h"
#include "shared/lib/json_strict.h"
#include "shared/payment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[200];
    json_t *root = NULL;
    field_errors errs;
    payment p;

    if (json_strict_parse((const char *)data, size, JSON_STRICT_MAX_DEPTH, &root, why,
                          sizeof why) != GW_OK)
        return 0;
    if (payment_validate(root, &p, &errs) == GW_OK) {
        char *canon = canon_dump(root);
        uint8_t fp[CANON_FINGERPRINT_LEN];
        json_t *again;

        if (canon == NULL)
            abort();
        canon_fingerprint(canon, strlen(canon), fp);
        /* the canonical form must parse back to an equal value that validates again */
        if (json_strict_parse(canon, strlen(canon), JSON_STRICT_MAX_DEPTH, &again, why,
                              sizeof why) != GW_OK ||
            !json_equal(root, again) || payment_validate(again, &p, &errs) != GW_OK)
            abort();
        json_decref(again);
        free(canon);
    } else if (errs.n == 0) {
        abort(); /* invalid without a reason is a bug */
    }
    json_decref(root);
    return 0;
}
