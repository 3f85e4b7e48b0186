/*
 * tests/faults/tfault.h - the fixture of a fault test: the whole pipeline on a database and a
 * vhost of its own, a paced client that retries with the same event_id, and the invariants
 * every fault must leave intact (docs/architecture.md and docs/operations.md, "Failpoints" and
 * docs/failure-matrix.md)
 */
#ifndef TESTS_FAULTS_TFAULT_H
#define TESTS_FAULTS_TFAULT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/e2e/te2e.h"
#include "tests/support/tapi.h"

/* Every program of a test gets the same delay steps (they all declare the retry queues). */
#define TF_DELAYS        "RETRY_DELAYS_MS=200,400"
#define TF_RETRY_ACCOUNT "5555-5" /* bank 001: fail-first=1, settles on attempt 2 */
#define TF_RULES         "BANK_SIM_RULES=001/" TF_RETRY_ACCOUNT ":fail-first=1"

/* ---- seeded randomness ------------------------------------------------------------------- */

/*
 * tf_seed - $GW_FAULT_SEED when set, else a fresh one; printed on stdout with the way to
 * run the same case again.
 */
uint64_t tf_seed(const char *test);

/* A xorshift64* generator; not thread-safe (one per thread). */
typedef struct tf_rng {
    uint64_t s;
} tf_rng;

void tf_rng_init(tf_rng *r, uint64_t seed);
uint64_t tf_rng_next(tf_rng *r);
/* tf_rng_range - uniform in [lo, hi]. */
long long tf_rng_range(tf_rng *r, long long lo, long long hi);

/* ---- the pipeline -------------------------------------------------------------------------- */

typedef enum tf_prog { TF_API, TF_RELAY, TF_WORKER } tf_prog;

/* tf_prog_name - "api", "relay", "worker". */
const char *tf_prog_name(tf_prog which);

#define TF_MAX_LOGS 32

typedef struct tf_world {
    te2e e;
    char amqp_env[640]; /* AMQP_URL=<the vhost's URL>, for the API */
    pthread_mutex_t lock;
    char api_url[64]; /* under lock; "" while the API is down */
    int api_gen;      /* under lock; +1 on every down and up */
    tapi api;
    tprog relay, worker;
    bool up[3];
    int starts[3];
    int crashes;                 /* deaths this test caused: failpoint exits, SIGKILLs */
    char logs[TF_MAX_LOGS][256]; /* the log of every process started, dead ones too */
    int nlogs;
} tf_world;

/* tf_init - te2e_init() plus the rest: 0 ready, 77 skip, 1 failed (te2e's meaning). */
int tf_init(tf_world *w, const char *name);
void tf_cleanup(tf_world *w);

/*
 * tf_main - the whole main() of a fault test: tf_init(@w, @name), @run when ready, tf_cleanup();
 * 77 when skipped, else the summary of @summary (a fixture that could not be set up is a
 * failure). A seeded @run asks tf_seed(@w->e.name) for its seed.
 */
int tf_main(tf_world *w, const char *name, const char *summary, void (*run)(void));

/*
 * tf_start - start one program with the test's settings (TF_DELAYS, TF_RULES for the worker,
 * the vhost for the API) and GATEWAY_FAILPOINTS=@failpoints when not NULL. Waits until it is
 * ready (API: listening). False after printing why.
 */
bool tf_start(tf_world *w, tf_prog which, const char *failpoints);

/* tf_start_all - worker, relay, API, in that order; @fp applies to @fp_prog only. */
bool tf_start_all(tf_world *w, tf_prog fp_prog, const char *fp);

/* tf_proc - the running process of @which, or NULL. */
tproc *tf_proc(tf_world *w, tf_prog which);

/* tf_running - whether @which is up and its process still runs. */
bool tf_running(tf_world *w, tf_prog which);

/*
 * tf_reap - after @which died: mark it down (the API's URL is cleared for the clients),
 * return its exit status and forget the process.
 */
int tf_reap(tf_world *w, tf_prog which);

/* tf_kill9 - SIGKILL @which, reap it (counted in crashes); its status (137 expected). */
int tf_kill9(tf_world *w, tf_prog which);

/* tf_stop - SIGTERM @which and CHECK a clean exit 0 (leak-free under ASan). */
void tf_stop(tf_world *w, tf_prog which);
void tf_stop_all(tf_world *w);

/* tf_logs_count - how often @needle occurs in the logs of every process this test started. */
int tf_logs_count(const tf_world *w, const char *needle);

/*
 * tf_check_logs - no program of this test reported a sanitizer error (ASan, UBSan; a program
 * killed by a signal cannot report leaks, the others exit through tf_stop); prints how many
 * deadlocks (SQLSTATE 40P01) the programs met, which cost a 1 s stall and a retry each.
 */
void tf_check_logs(const tf_world *w);

/* tf_api_url - the API's current URL into @buf ("" while down) and its generation. */
int tf_api_url(tf_world *w, char *buf, size_t len);

/* ---- events and the client ---------------------------------------------------------------- */

typedef enum tf_kind {
    TF_SETTLE,  /* approved, settles on attempt 1 */
    TF_RETRY,   /* approved to TF_RETRY_ACCOUNT: a transient failure, settles on attempt 2 */
    TF_REFUSED, /* refused: the broker returns it -> unroutable */
    TF_ZERO,    /* approved R$ 0: a permanent failure -> dead_lettered */
} tf_kind;

/* tf_kind_status - the terminal status a kind must reach. */
const char *tf_kind_status(tf_kind k);

typedef struct tf_event {
    char event_id[64];
    char payment_id[64];
    char *body; /* owned */
    tf_kind kind;
    long long amount;
    /* the client's record, under the load's lock */
    long status;   /* the final answer: 202, or 0 while none */
    bool replayed; /* the 202 carried Idempotent-Replayed: true */
    bool fresh_after_drop;
    int tries, drops, unavailable, in_flight;
    int expect_replay; /* -1: no expectation; else set by tf_load_snapshot() */
} tf_event;

/*
 * tf_events - @n events "<prefix>-e<i>" / "<prefix>-p<i>", i from 1, of a seeded mix:
 * about 70% TF_SETTLE, 14% TF_RETRY, 9% TF_REFUSED, 7% TF_ZERO; methods pix/ted/card,
 * random amounts, sometimes a payer and decided_at. Free with tf_events_free().
 */
tf_event *tf_events(const char *prefix, int n, tf_rng *rng);
void tf_events_free(tf_event *ev, int n);

#define TF_MAX_CLIENTS 16

typedef struct tf_load {
    tf_world *w;
    tf_event *ev;
    int n;
    int clients;
    int pace_us;  /* event i starts no earlier than t0 + i * pace_us */
    int event_ms; /* each event must get its 202 within this long */
    pthread_mutex_t lock;
    atomic_int next;
    atomic_int finished; /* client threads done */
    atomic_int accepted; /* 202s so far */
    long long t0;
    atomic_llong end_ms; /* no request after this moment: the whole load is bounded */
    pthread_t tid[TF_MAX_CLIENTS];
    int started;
} tf_load;

/*
 * tf_load_start - @clients threads send @ev paced @pace_us apart; each retries its event for up
 * to 90 s, and the whole load ends at the latest 90 s after its last event was due.
 */
bool tf_load_start(tf_load *l, tf_world *w, tf_event *ev, int n, int clients, int pace_us);

/* tf_load_abort - the clients give up now (each event left without a 202 is a failure). */
void tf_load_abort(tf_load *l);

/* tf_load_done - every client thread has finished. */
bool tf_load_done(tf_load *l);

/* tf_load_join - wait for the clients (they are bounded by event_ms each). */
void tf_load_join(tf_load *l);

/*
 * tf_load_snapshot - after the API died and before it restarts: every event whose request
 * was dropped and has no 202 yet must, on its retry, get a replay exactly when its payment row
 * exists now. Returns how many events it set an expectation for; *@with_row of them have a row.
 */
int tf_load_snapshot(tf_load *l, int *with_row);

/* ---- the invariants ------------------------------------------------------------------------ */

typedef struct tf_result {
    int events;   /* sent */
    int accepted; /* got a 202 */
    int replays, fresh_after_drop, drops, unavailable;
    int settled, unroutable, dead;
    long long dlq_messages;
    double duplicates_skipped;
} tf_result;

/*
 * tf_check_invariants - the client got a 202 for every event; within @settle_ms every
 * accepted event reaches the terminal status its kind says (nothing accepted is lost, nothing
 * unaccepted exists); one balanced effect (2 lines, debit = credit = amount) per settled event
 * and none for others; the inbox is exactly the settled set; the outbox is drained; every
 * dead-lettered event is in the DLQ and nothing else is; the settlement and retry queues end
 * empty; a replay only follows a dropped attempt, and matches the snapshot's expectation;
 * GET /admin/reconciliation says ok. Fills @res (may be NULL). True when all held.
 */
bool tf_check_invariants(tf_world *w, tf_load *l, int settle_ms, tf_result *res);

/* tf_figures - the closing line every fault test prints (collected for the note). */
void tf_figures(const char *test, int crashes, int events, int faults, int garbage);

/* ---- raw HTTP ------------------------------------------------------------------------------ */

/*
 * tf_raw - send @len bytes on a new connection (MSG_NOSIGNAL; a reset mid-way is fine), then
 * with @half_close shut the write side, and read the answer for up to @timeout_ms. Returns the
 * HTTP status of the first response line, 0 when the server closed without answering, -1 when
 * nothing came before the deadline, -2 when the connection failed.
 */
int tf_raw(int port, const void *data, size_t len, bool half_close, int timeout_ms);

#endif
