/* shared/lib/token.h - bearer tokens: constant-time comparison and random generation */
#ifndef SHARED_LIB_TOKEN_H
#define SHARED_LIB_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

/* token_init - initialise libsodium; false when it cannot be used. Call from main(). */
bool token_init(void);

/*
 * token_equal - whether @given (@len bytes, may be NULL) equals @expected, in
 * time that depends on neither content nor length: both are hashed first.
 */
bool token_equal(const char *given, size_t len, const char *expected);

/* token_random_hex - @bytes random bytes as 2*@bytes hex digits into @out (size >= 2*bytes+1). */
void token_random_hex(char *out, size_t bytes);

/*
 * token_unique_hex - like token_random_hex, for identifiers that must not
 * repeat but are no secret (request ids, bank references): the bytes come
 * from the calling thread's pool, so most calls make no system call.
 */
void token_unique_hex(char *out, size_t bytes);

#endif
