/* tests/cluster/tcluster.h - the cluster suite's fixture: the programs on quorum queues, a stream
 */
#ifndef TESTS_CLUSTER_TCLUSTER_H
#define TESTS_CLUSTER_TCLUSTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tapi.h"

/* The three programs of one test, on its database and vhost, with QUEUE_TYPE=quorum. */
typedef struct tcluster {
    te2e *e;
    tprog relay, worker;
    tapi api;
} tcluster;

/*
 * tcluster_start - relay, worker and API with QUEUE_TYPE=quorum, AMQP_URL the
 * cluster's list, then @extra (NULL-terminated, may be NULL) for all three.
 * False (checked, logs printed) when one did not start.
 */
bool tcluster_start(tcluster *c, te2e *e, const char *label, const char *const *extra);
void tcluster_stop(tcluster *c);

/*
 * A guard (tests/support/tstack.h) that runs "$GW_STACK start @what" (broker:
 * every node; db) if the test dies before tcluster_finish().
 */
typedef struct tguard {
    const char *what;
    pid_t pid;
    int fd;
} tguard;
void tcluster_guard(tguard *g, const char *what);

/* tcluster_finish - stop @c's programs, start @g's servers again, dismiss the guard. */
void tcluster_finish(tcluster *c, tguard *g);

/* tcluster_leader - K (1-based) of the node holding @queue's leader in the test's vhost; -1. */
int tcluster_leader(const te2e *e, const char *queue);
/* tcluster_node - "$GW_STACK @verb broker-@k" (kill, stop, start); true when it exited 0. */
bool tcluster_node(const char *verb, int k);
/* tcluster_server - "$GW_STACK @verb @kind-@k" (broker-K, db-K), timed in the log. */
bool tcluster_server(const char *verb, const char *kind, int k);

/*
 * A stream of accepts: a thread posting payment "<prefix>-<i>" (i from 1) to
 * the API one after the other, about @per_s a second, until stopped.
 */
typedef struct tstream {
    const tapi *api;
    const char *prefix;
    int per_s;
    pthread_t thread;
    atomic_bool stop;
    atomic_int sent, accepted, unavailable, other; /* 202, 503, anything else */
} tstream;

bool tstream_start(tstream *s, const tapi *api, const char *prefix, int per_s);
void tstream_stop(tstream *s);

/*
 * tcluster_check_once - every payment of @prefix the API answered 202 is
 * settled, with exactly one debit and one credit in the ledger, within
 * @timeout_ms; no payment of @prefix is dead-lettered. Checks; prints what
 * it found.
 */
void tcluster_check_once(tdb *db, const char *prefix, long long accepted, int timeout_ms);

#endif
