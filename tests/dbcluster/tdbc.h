/* tests/dbcluster/tdbc.h - the database cluster suite: its programs, and clients that retry */
#ifndef TESTS_DBCLUSTER_TDBC_H
#define TESTS_DBCLUSTER_TDBC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tapi.h"

/* The three programs of one test, on its database (on the Patroni cluster) and vhost. */
typedef struct tdbc {
    te2e *e;
    tprog relay, worker;
    tapi api;
} tdbc;

/* tdbc_start - relay, worker and API; false (checked, logs printed) when one did not start. */
bool tdbc_start(tdbc *c, te2e *e, const char *label);
void tdbc_stop(tdbc *c);

/* tdbc_primary - K of the node that takes writes ("$GW_STACK primary"); -1 while none does. */
int tdbc_primary(void);
/*
 * tdbc_await_primary - poll tdbc_primary() until it names a node other than
 * @old, @timeout_ms at most; that node, or -1. *@at_ms: when it was seen.
 */
int tdbc_await_primary(int old, int timeout_ms, long long *at_ms);
/* tdbc_node - "$GW_STACK @verb db-@k" (kill, stop, start); true when it exited 0. */
bool tdbc_node(const char *verb, int k);
/* tdbc_sync_standby - K of the primary's synchronous standby (from pg_stat_replication); -1. */
int tdbc_sync_standby(tdb *db);

/*
 * Clients that behave as the contract asks of them: @n threads, each posting
 * payment "<prefix>-<client>-<i>" and, on anything but 202, posting the same
 * one again 100 ms later until it is answered 202; then the next, @pause_ms
 * later (0: at once). A client stops after a 202 once told to stop (or 30 s
 * later, leaving that payment unanswered: counted in abandoned).
 */
#define TCLIENTS_MAX 8
typedef struct tclients {
    const tapi *api;
    const char *prefix;
    int n, pause_ms;
    pthread_t threads[TCLIENTS_MAX];
    atomic_bool stop;
    atomic_int accepted;       /* payments answered 202 (each once) */
    atomic_int replayed;       /* of those, answered 202 as a replay of an earlier commit */
    atomic_int unavailable;    /* 503 answers */
    atomic_int no_retry_after; /* 503 answers without Retry-After */
    atomic_int other;          /* any other answer, or none */
    atomic_int abandoned;      /* payments never answered 202 */
    atomic_llong slowest_ms;   /* the longest answer */
    atomic_llong last_refusal; /* tproc_now_ms() of the last answer that was not 202 */
    atomic_llong accepted_after_refusal; /* 202s after the last refusal so far */
} tclients;

bool tclients_start(tclients *c, const tapi *api, const char *prefix, int n, int pause_ms);
/* tclients_stop - stop and join them; prints what they saw. */
void tclients_stop(tclients *c);

/*
 * tdbc_check_answers - what must hold of the answers: only 202 and 503 with
 * Retry-After, none slower than 10 s, none abandoned.
 */
void tdbc_check_answers(tclients *c);

#endif
