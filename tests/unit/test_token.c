/* tests/unit/test_token.c - ids from a thread's pool of random bytes: hex, and none repeats,
 * across the pool's refills and across threads */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shared/lib/token.h"
#include "tests/support/tcheck.h"

#define IDS     3000 /* 8 bytes each: 24,000 bytes, many refills of the pool */
#define THREADS 4

static char ids[THREADS][IDS][17];

static void *make_ids(void *arg)
{
    char(*out)[17] = arg;

    for (int i = 0; i < IDS; i++)
        token_unique_hex(out[i], 8);
    return NULL;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_unique_ids_are_hex_and_never_repeat(void)
{
    pthread_t th[THREADS];
    char(*all)[17] = ids[0]; /* the threads' ids as one array */
    bool hex = true;
    int repeats = 0;

    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, make_ids, ids[t]);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < IDS; i++)
            hex = hex && strlen(ids[t][i]) == 16 && strspn(ids[t][i], "0123456789abcdef") == 16;
    CHECK(hex);
    qsort(all, (size_t)THREADS * IDS, sizeof all[0], by_text);
    for (int k = 1; k < THREADS * IDS; k++)
        repeats += strcmp(all[k - 1], all[k]) == 0;
    CHECK_INT(repeats, 0);
}

static void test_random_hex_is_capped(void)
{
    char out[129 + 8];

    memset(out, 'x', sizeof out);
    token_random_hex(out, 100); /* more than the 64 bytes it gives */
    CHECK_INT((long long)strlen(out), 128);
    token_unique_hex(out, 100);
    CHECK_INT((long long)strlen(out), 128);
}

int main(void)
{
    CHECK(token_init());
    TRUN(test_unique_ids_are_hex_and_never_repeat);
    TRUN(test_random_hex_is_capped);
    return tcheck_summary("token");
}
