/* tests/unit/test_banksim_store.c - payments-banksim's store: group commit under concurrency,
 * each key executed once, and the file read back the same */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "banksim/store.h"
#include "tests/support/tcheck.h"

#define THREADS 16
#define KEYS    400 /* each thread executes every key of its half: every key races 8 threads */

typedef struct worker_arg {
    store *s;
    int id;
    int executed, conflicts, failed;
    char refs[KEYS][24]; /* the reference each key came back with */
} worker_arg;

static void transfer_of(int key, store_transfer *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->transfer_id, sizeof t->transfer_id, "evt-%d", key);
    snprintf(t->payment_id, sizeof t->payment_id, "pay-%d", key);
    snprintf(t->method, sizeof t->method, "pix");
    snprintf(t->currency, sizeof t->currency, "BRL");
    snprintf(t->payee_bank, sizeof t->payee_bank, "001");
    /* every third one escaped on disk (jansson prints its line), the others printed as they are */
    snprintf(t->payee_account, sizeof t->payee_account, "%s", key % 3 == 0 ? "12\"34" : "1234");
    t->amount_cents = 100 + key;
}

static void *execute_all(void *arg)
{
    worker_arg *w = arg;

    for (int k = w->id % 2; k < KEYS; k += 2) {
        store_transfer t;
        gw_err err;

        transfer_of(k, &t);
        snprintf(t.bank_reference, sizeof t.bank_reference, "BSIM-%016x",
                 (unsigned)(w->id * KEYS + k));
        err = store_execute(w->s, &t);
        if (err == GW_OK)
            w->executed++;
        else if (err == GW_ERR_CONFLICT)
            w->conflicts++;
        else
            w->failed++;
        snprintf(w->refs[k], sizeof w->refs[k], "%s", t.bank_reference);
    }
    return NULL;
}

static char path[128];

static void test_concurrent_keys_execute_once(void)
{
    static worker_arg w[THREADS];
    pthread_t th[THREADS];
    store *s = NULL, *again = NULL;
    int executed = 0, conflicts = 0, failed = 0;
    store_transfer page[KEYS];
    bool more = true;

    unlink(path);
    if (!CHECK_INT(store_open(path, &s), GW_OK))
        return;
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_arg){.s = s, .id = i};
        pthread_create(&th[i], NULL, execute_all, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        executed += w[i].executed;
        conflicts += w[i].conflicts;
        failed += w[i].failed;
    }
    CHECK_INT(executed, KEYS);
    CHECK_INT(conflicts, KEYS * (THREADS / 2 - 1));
    CHECK_INT(failed, 0);
    CHECK_INT((long long)store_count(s), KEYS);
    /* every thread got the one stored reference of each key it asked for */
    for (int k = 0; k < KEYS; k++) {
        store_transfer t;

        if (!CHECK(store_find(s, (transfer_of(k, &t), t.transfer_id), &t)))
            continue;
        for (int i = k % 2; i < THREADS; i += 2)
            CHECK_STR(w[i].refs[k], t.bank_reference);
    }
    store_close(s);

    /* read back: the same transfers, seq 1..KEYS in order */
    if (!CHECK_INT(store_open(path, &again), GW_OK))
        return;
    CHECK_INT((long long)store_count(again), KEYS);
    CHECK_INT((long long)store_list(again, 0, KEYS, page, &more), KEYS);
    CHECK(!more);
    for (int k = 0; k < KEYS; k++) {
        int key = atoi(page[k].transfer_id + 4); /* "evt-N" */
        store_transfer want;

        transfer_of(key, &want);
        CHECK_INT(page[k].seq, k + 1);
        CHECK_STR(page[k].transfer_id, want.transfer_id);
        CHECK_STR(page[k].payment_id, want.payment_id);
        CHECK_STR(page[k].method, "pix");
        CHECK_STR(page[k].payee_bank, "001");
        CHECK_STR(page[k].payee_account, want.payee_account);
        CHECK_STR(page[k].currency, "BRL");
        CHECK_INT(page[k].amount_cents, want.amount_cents);
        CHECK_INT((long long)strlen(page[k].bank_reference), 21);
    }
    store_close(again);
    unlink(path);
}

static void test_memory_only(void)
{
    store *s = NULL;
    store_transfer t;

    if (!CHECK_INT(store_open(NULL, &s), GW_OK))
        return;
    transfer_of(1, &t);
    snprintf(t.bank_reference, sizeof t.bank_reference, "BSIM-0000000000000001");
    CHECK_INT(store_execute(s, &t), GW_OK);
    CHECK_INT(t.seq, 1);
    transfer_of(1, &t);
    snprintf(t.bank_reference, sizeof t.bank_reference, "BSIM-0000000000000002");
    CHECK_INT(store_execute(s, &t), GW_ERR_CONFLICT);
    CHECK_STR(t.bank_reference, "BSIM-0000000000000001");
    CHECK_INT((long long)store_count(s), 1);
    store_close(s);
}

int main(void)
{
    snprintf(path, sizeof path, "%s/paygw-banksim-store-%d.jsonl",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    TRUN(test_concurrent_keys_execute_once);
    TRUN(test_memory_only);
    return tcheck_summary("banksim_store");
}
