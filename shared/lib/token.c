/* shared/lib/token.c - libsodium does the cryptography; this only wires it */
#include "shared/lib/token.h"

#include <string.h>

#include <sodium.h>

bool token_init(void)
{
    return sodium_init() >= 0;
}

bool token_equal(const char *given, size_t len, const char *expected)
{
    unsigned char a[crypto_generichash_BYTES], b[crypto_generichash_BYTES];

    if (given == NULL)
        given = "", len = 0;
    crypto_generichash(a, sizeof a, (const unsigned char *)given, len, NULL, 0);
    crypto_generichash(b, sizeof b, (const unsigned char *)expected, strlen(expected), NULL, 0);
    return sodium_memcmp(a, b, sizeof a) == 0;
}

void token_random_hex(char *out, size_t bytes)
{
    unsigned char buf[64];

    if (bytes > sizeof buf)
        bytes = sizeof buf;
    randombytes_buf(buf, bytes);
    sodium_bin2hex(out, 2 * bytes + 1, buf, bytes);
}

/* Each thread's pool of random bytes: one getrandom(2) per POOL_BYTES, not one per id. */
#define POOL_BYTES 512

void token_unique_hex(char *out, size_t bytes)
{
    static __thread unsigned char pool[POOL_BYTES];
    static __thread size_t left;

    if (bytes > 64)
        bytes = 64;
    if (left < bytes) {
        randombytes_buf(pool, sizeof pool);
        left = sizeof pool;
    }
    left -= bytes;
    sodium_bin2hex(out, 2 * bytes + 1, pool + left, bytes);
    sodium_memzero(pool + left, bytes); /* each byte serves one id */
}
