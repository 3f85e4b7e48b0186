/* shared/lib/canon.c - canonical JSON and its fingerprint */
#include "shared/lib/canon.h"

#include <sodium.h>

char *canon_dump(const json_t *value)
{
    return json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
}

void canon_fingerprint(const char *canon, size_t len, uint8_t out[CANON_FINGERPRINT_LEN])
{
    crypto_generichash(out, CANON_FINGERPRINT_LEN, (const unsigned char *)canon, len, NULL, 0);
}
