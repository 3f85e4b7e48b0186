/* shared/lib/canon.h - canonical form and fingerprint of a decoded JSON value */
#ifndef SHARED_LIB_CANON_H
#define SHARED_LIB_CANON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define CANON_FINGERPRINT_LEN 32

/*
 * canon_dump - compact JSON with sorted keys and ASCII escapes: two values that
 * decode equal have the same canonical text, whatever their key order or
 * white space. Returns a new string owned by the caller (free()), NULL on OOM.
 */
char *canon_dump(const json_t *value);

/* canon_fingerprint - BLAKE2b-256 (libsodium) of @len bytes of @canon. */
void canon_fingerprint(const char *canon, size_t len, uint8_t out[CANON_FINGERPRINT_LEN]);

#endif
