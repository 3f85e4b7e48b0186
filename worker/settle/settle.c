/* worker/settle/settle.c - a batch at a time: verdicts before the COMMIT, acks only after it */
#include "worker/settle/settle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <amqp.h>

#include "shared/failpoint.h"
#include "shared/lib/backoff.h"
#include "shared/lib/json_strict.h"
#include "shared/lib/log.h"
#include "shared/lib/pace.h"
#include "shared/payment.h"
#include "shared/pg/db.h"
#include "worker/settle/consumer.h"
#include "worker/settle/inbox.h"
#include "worker/settle/retry.h"
#include "worker/settle/verdict.h"

#define PURGE_IDLE_ROWS 1000
#define PURGE_BUSY_ROWS 200 /* 10-20 ms of a cold DELETE: what a batch may wait behind */

_Static_assert(sizeof((delivery *)0)->bank_reference == BANK_REFERENCE_MAX,
               "a delivery holds any reference the bank may give");

/* One batch from its receipt to its answer; two may be open at once (bank.h). */
typedef struct batch_state {
    delivery *d; /* SETTLE_BATCH_MAX */
    int n;
    int slot;         /* the bank's */
    bank_call *calls; /* SETTLE_BATCH_MAX: the bank calls of this batch */
    int ncalls;
    inbox_item items[SETTLE_BATCH_MAX]; /* the valid ones, for the pre-check */
    bool seen[SETTLE_BATCH_MAX];        /* ...and what it found */
    int idx[SETTLE_BATCH_MAX], m;       /* items[k] is d[idx[k]] */
    bool checked; /* the bank was called, and the pre-check answered where it ran */
} batch_state;

struct settle {
    const gw_config *cfg;
    const bank *bank;
    health *health;
    db_conn *db;
    consumer *mq; /* the broker side: deliveries, answers, the retry copies' connection */
    metric *settled, *duplicates, *dead_invalid, *dead_permanent, *dead_exhausted;
    metric *retried[CONFIG_MAX_RETRY_STEPS];
    metric *accept_to_settle_seconds;
    batch_state batches[BANK_SLOTS];
    batch_state *open; /* received, its bank calls in flight, not committed yet; or NULL */
    long delivered_ms; /* when a receive last brought deliveries (monotonic) */
    pace purge;        /* the inbox purge, in pieces between batches */
};

gw_err settle_new(const gw_config *cfg, const bank *b, metrics *m, settle **out)
{
    settle *s = calloc(1, sizeof *s);
    char labels[48];

    if (s == NULL)
        return GW_ERR_NOMEM;
    if (consumer_new(cfg, m, &s->mq) != GW_OK) {
        free(s);
        return GW_ERR_NOMEM;
    }
    s->cfg = cfg;
    pace_init(&s->purge, 60000);
    s->bank = b;
    for (int k = 0; k < BANK_SLOTS; k++) {
        s->batches[k].slot = k;
        s->batches[k].d = calloc(SETTLE_BATCH_MAX, sizeof *s->batches[k].d);
        s->batches[k].calls = calloc(SETTLE_BATCH_MAX, sizeof *s->batches[k].calls);
        if (s->batches[k].d == NULL || s->batches[k].calls == NULL) {
            settle_free(s);
            return GW_ERR_NOMEM;
        }
    }
    s->settled = metrics_counter(m, "paygw_worker_settled_total", NULL,
                                 "Ledger effects committed (then acked).");
    s->duplicates =
        metrics_counter(m, "paygw_worker_duplicates_skipped_total", NULL,
                        "Deliveries whose effect was already committed: acked, no effect.");
    for (int i = 0; i < cfg->retry_steps; i++) {
        snprintf(labels, sizeof labels, "delay_ms=\"%d\"", cfg->retry_delays_ms[i]);
        s->retried[i] = metrics_counter(m, "paygw_worker_retried_total", labels,
                                        "Transient failures sent to a delay queue, by step.");
    }
    s->dead_invalid = metrics_counter(m, "paygw_worker_dead_lettered_total", "reason=\"invalid\"",
                                      "Deliveries sent to the DLQ, by reason.");
    s->dead_permanent =
        metrics_counter(m, "paygw_worker_dead_lettered_total", "reason=\"permanent\"", "");
    s->dead_exhausted =
        metrics_counter(m, "paygw_worker_dead_lettered_total", "reason=\"exhausted\"", "");
    s->accept_to_settle_seconds =
        metrics_histogram(m, "paygw_accept_to_settle_seconds", NULL,
                          "From the accept's COMMIT to the settle's COMMIT.",
                          metrics_latency_bounds, metrics_latency_nbounds);
    *out = s;
    return GW_OK;
}

void settle_set_health(settle *s, health *h)
{
    s->health = h;
    consumer_set_health(s->mq, h);
}

static void drop_db(settle *s)
{
    db_close(s->db);
    s->db = NULL;
    health_set_db(s->health, false);
}

void settle_free(settle *s)
{
    if (s == NULL)
        return;
    consumer_free(s->mq);
    drop_db(s);
    for (int k = 0; k < BANK_SLOTS; k++) {
        free(s->batches[k].d);
        free(s->batches[k].calls);
    }
    free(s);
}

static gw_err connect_db(settle *s)
{
    gw_err err;

    if (s->db == NULL && (err = db_open(s->cfg->database_url, "payments-worker", inbox_stmts,
                                        inbox_nstmts, false, &s->db)) != GW_OK)
        return err;
    if ((err = db_ensure(s->db)) != GW_OK)
        return err;
    health_set_db(s->health, true);
    return GW_OK;
}

/* A transient failure: a delayed copy while attempts remain, the DLQ after. */
static verdict on_transient(settle *s, const amqp_envelope_t *env, const payment *p, int attempt,
                            const char *why)
{
    if (retry_exhausted(s->cfg, attempt)) {
        char last[BANK_WHY_MAX + 48];

        snprintf(last, sizeof last, "retries exhausted after %d attempts: %s", attempt, why);
        if (inbox_mark_dead(s->db, p->payment_id, p->event_id, attempt, last) != GW_OK)
            return VERDICT_REQUEUE;
        metrics_add(s->dead_exhausted, 1);
        log_warn("payment_dead_lettered", "event_id=%s payment_id=%s attempt=%d reason=exhausted",
                 p->event_id, p->payment_id, attempt);
        return VERDICT_DEAD;
    }
    /* the status first: it is only a view, and the copy below is what carries the retry */
    if (inbox_mark_retrying(s->db, p, attempt, why) != GW_OK)
        return VERDICT_REQUEUE;
    if (retry_publish(consumer_retry_publisher(s->mq), s->cfg, env, attempt, why, false) != GW_OK)
        return VERDICT_REQUEUE; /* not acked: the broker redelivers it */
    if (failpoint_hit("worker.after_retry_publish") != GW_OK)
        return VERDICT_REQUEUE;
    metrics_add(s->retried[attempt - 1], 1);
    log_info("payment_retrying", "event_id=%s payment_id=%s attempt=%d delay_ms=%d error=\"%s\"",
             p->event_id, p->payment_id, attempt, retry_delay_ms(s->cfg, attempt), why);
    return VERDICT_RETRY;
}

static void decide(delivery *d, verdict v)
{
    d->v = v;
    d->decided = true;
}

/* A delivery whose effect is committed already: counted and logged the same wherever found. */
static void skip_duplicate(settle *s, const delivery *d)
{
    metrics_add(s->duplicates, 1);
    log_info("duplicate_skipped", "event_id=%s payment_id=%s attempt=%d redelivered=%d",
             d->p.event_id, d->p.payment_id, d->attempt, d->env.redelivered);
}

/*
 * An outcome nobody knows yet (the HTTP bank's answer was lost and its lookup
 * did not say): never the DLQ. A delayed copy like a transient failure while
 * attempts remain; after that, again and again at the last step's delay, until
 * the bank says executed or not (contract section 12).
 */
static verdict on_unknown(settle *s, const amqp_envelope_t *env, const payment *p, int attempt,
                          const char *why)
{
    int step = attempt < s->cfg->retry_steps ? attempt : s->cfg->retry_steps;

    if (inbox_mark_retrying(s->db, p, attempt, why) != GW_OK ||
        retry_publish(consumer_retry_publisher(s->mq), s->cfg, env, step, why, true) != GW_OK)
        return VERDICT_REQUEUE;
    metrics_add(s->retried[step - 1], 1);
    log_warn("payment_outcome_unknown",
             "event_id=%s payment_id=%s attempt=%d delay_ms=%d error=\"%s\"", p->event_id,
             p->payment_id, attempt, retry_delay_ms(s->cfg, step), why);
    return VERDICT_RETRY;
}

/*
 * triage - after validate(), the inbox pre-check and the bank calls, before
 * the batch transaction: a known duplicate, and what the bank's answer means
 * (event "processed"). Leaves undecided only the deliveries to settle now.
 */
static void triage(settle *s, delivery *d, bool seen, const bank_call *call)
{
    const char *why;

    if (seen) {
        skip_duplicate(s, d);
        decide(d, VERDICT_ACK);
        return;
    }
    why = call->why;
    if (call->result == BANK_OK) {
        snprintf(d->bank_reference, sizeof d->bank_reference, "%s", call->reference);
    } else if (call->result == BANK_UNKNOWN ||
               (call->result == BANK_TRANSIENT && d->outcome_unknown && !call->absent)) {
        /* once unknown, only the bank's executed or its "no such transfer" ends it: a refused
         * connection or a 5xx now says nothing of what an earlier call did */
        decide(d, on_unknown(s, &d->env, &d->p, d->attempt, why));
    } else if (call->result == BANK_TRANSIENT) {
        decide(d, on_transient(s, &d->env, &d->p, d->attempt, why));
    } else if (call->result == BANK_PERMANENT) {
        if (inbox_mark_dead(s->db, d->p.payment_id, d->p.event_id, d->attempt, why) != GW_OK) {
            decide(d, VERDICT_REQUEUE);
            return;
        }
        metrics_add(s->dead_permanent, 1);
        log_warn("payment_dead_lettered",
                 "event_id=%s payment_id=%s attempt=%d reason=permanent error=\"%s\"",
                 d->p.event_id, d->p.payment_id, d->attempt, why);
        decide(d, VERDICT_DEAD);
    }
}

/* Parse and validate with the API's rules (a message the API would refuse is poison); false
 * (decided DEAD) for poison. */
static bool validate(settle *s, delivery *d)
{
    const amqp_basic_properties_t *props = &d->env.message.properties;
    char reason[200];
    json_t *root = NULL;
    field_errors errs;
    bool ok;

    d->attempt = retry_attempt(props);
    d->outcome_unknown = retry_outcome_unknown(props);
    if (props->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        retry_bytes_str(props->message_id, d->message_id, sizeof d->message_id);
    /* the last test: docs/architecture.md, "The flow", message_id = event_id */
    ok = json_strict_parse(d->env.message.body.bytes, d->env.message.body.len,
                           JSON_STRICT_MAX_DEPTH, &root, reason, sizeof reason) == GW_OK &&
         payment_validate(root, &d->p, &errs) == GW_OK && strcmp(d->message_id, d->p.event_id) == 0;
    json_decref(root);
    if (!ok) {
        metrics_add(s->dead_invalid, 1);
        log_warn("delivery_invalid", "message_id=\"%s\" delivery_tag=%llu bytes=%zu", d->message_id,
                 (unsigned long long)d->env.delivery_tag, d->env.message.body.len);
        decide(d, VERDICT_DEAD);
    }
    return ok;
}

/*
 * settle_pending - one transaction for every undecided delivery
 * (inbox_settle_batch(): settle_batch(), sql/0009), then their verdicts: event
 * "committed". Nothing is acked before this COMMIT; when it fails, they all go
 * back to the queue.
 */
static void settle_pending(settle *s, delivery *batch, int n)
{
    inbox_item items[SETTLE_BATCH_MAX];
    int idx[SETTLE_BATCH_MAX], m = 0;

    for (int i = 0; i < n; i++) {
        if (batch[i].decided)
            continue;
        items[m].p = &batch[i].p;
        items[m].attempt = batch[i].attempt;
        items[m].bank_reference = batch[i].bank_reference;
        idx[m++] = i;
    }
    if (m == 0)
        return;
    if (inbox_settle_batch(s->db, items, m) != GW_OK) {
        for (int k = 0; k < m; k++)
            decide(&batch[idx[k]], VERDICT_REQUEUE); /* rolled back: nothing happened */
        return;
    }
    log_hold(); /* the batch's lines in one write */
    for (int k = 0; k < m; k++) {
        delivery *d = &batch[idx[k]];

        if (items[k].failed) {
            decide(d, VERDICT_REQUEUE);
            continue;
        }
        /* the logs and series of each outcome; its verdict comes from the one table */
        switch (items[k].outcome) {
        case INBOX_SETTLED: /* event "committed" (docs/architecture.md, "Five events") */
            metrics_add(s->settled, 1);
            metrics_observe(s->accept_to_settle_seconds, items[k].accept_to_settle_s);
            log_info("payment_settled", "event_id=%s payment_id=%s attempt=%d amount_cents=%lld",
                     d->p.event_id, d->p.payment_id, d->attempt, (long long)d->p.amount_cents);
            break;
        case INBOX_DUPLICATE: /* a copy in the same batch, or one the pre-check did not see */
            skip_duplicate(s, d);
            break;
        case INBOX_TERMINAL:
            log_warn("settle_after_dead_letter", "event_id=%s payment_id=%s", d->p.event_id,
                     d->p.payment_id);
            break;
        case INBOX_UNKNOWN:
            metrics_add(s->dead_invalid, 1);
            log_warn("payment_unknown", "event_id=%s payment_id=%s", d->p.event_id,
                     d->p.payment_id);
            break;
        }
        decide(d, verdict_of_outcome(items[k].outcome));
    }
    log_release();
}

/*
 * sync_duplicates - a duplicate is acked because its inbox row exists; that row
 * may be committed on the primary and on no standby yet (a COMMIT whose wait was
 * cancelled: docs/decisions.md, 22). Ack only once a commit of ours has waited for
 * the standby, which then holds the row as well; otherwise give them back.
 */
static void sync_duplicates(settle *s, delivery *batch, const int *idx, const bool *seen, int m)
{
    int dups = 0;

    for (int k = 0; k < m; k++)
        dups += seen[k];
    if (dups == 0 || db_sync_barrier(s->db) == GW_OK)
        return;
    for (int k = 0; k < m; k++)
        if (seen[k])
            decide(&batch[idx[k]], VERDICT_REQUEUE);
}

/* The inbox pre-check of the batch's valid deliveries; on failure all of them go back. */
static bool precheck(settle *s, batch_state *bt)
{
    if (inbox_seen_many(s->db, bt->items, bt->m, bt->seen) == GW_OK)
        return true;
    for (int k = 0; k < bt->m; k++)
        decide(&bt->d[bt->idx[k]], VERDICT_REQUEUE);
    return false;
}

/*
 * The in-process bank decides at once and costs nothing to ask again, so it is
 * asked first and the pre-check runs only for a batch with an answer other than
 * "executed": a known duplicate is acked whatever the bank says of it (triage()),
 * and a duplicate the bank would settle is found by settle_batch() itself
 * (INBOX_DUPLICATE) on a COMMIT that waits for the standby. One round trip per
 * batch instead of two (docs/decisions.md, 43).
 */
static void open_batch_in_process(settle *s, batch_state *bt)
{
    bool all_ok = true;
    int c = 0;

    for (int k = 0; k < bt->m; k++)
        bt->calls[k] = (bank_call){.p = &bt->d[bt->idx[k]].p, .attempt = bt->d[bt->idx[k]].attempt};
    bank_send(s->bank, bt->slot, bt->calls, bt->m);
    for (int k = 0; k < bt->m; k++) {
        bt->seen[k] = false;
        all_ok = all_ok && bt->calls[k].result == BANK_OK;
    }
    if (!all_ok && !precheck(s, bt))
        return;
    bt->checked = true;
    for (int k = 0; k < bt->m; k++) /* decide_batch() pairs the calls with the unseen ones */
        if (!bt->seen[k])
            bt->calls[c++] = bt->calls[k];
    bt->ncalls = c;
}

/* The first half of a batch: validated, pre-checked, and its bank calls sent. */
static void open_batch(settle *s, batch_state *bt)
{
    bt->m = bt->ncalls = 0;
    bt->checked = false;
    for (int i = 0; i < bt->n; i++) {
        bt->d[i].bank_reference[0] = '\0';
        if (!validate(s, &bt->d[i]))
            continue;
        bt->items[bt->m].p = &bt->d[i].p;
        bt->items[bt->m].attempt = bt->d[i].attempt;
        bt->items[bt->m].bank_reference = NULL;
        bt->idx[bt->m++] = i;
    }
    if (bt->m == 0)
        return;
    if (!bank_pipelined(s->bank)) {
        open_batch_in_process(s, bt);
        return;
    }
    /* a cheap pre-check, so the bank is not called again for an effect already committed */
    if (!precheck(s, bt))
        return;
    bt->checked = true;
    /* the bank, for every one not settled before: all at once (an HTTP bank: concurrently) */
    for (int k = 0; k < bt->m; k++)
        if (!bt->seen[k])
            bt->calls[bt->ncalls++] =
                (bank_call){.p = &bt->d[bt->idx[k]].p, .attempt = bt->d[bt->idx[k]].attempt};
    bank_send(s->bank, bt->slot, bt->calls, bt->ncalls);
}

/* The second half: the bank's answers, one COMMIT for the batch (two round trips in all when
 * the pre-check ran), every delivery decided. */
static void decide_batch(settle *s, batch_state *bt)
{
    if (!bt->checked)
        return; /* all decided already */
    bank_finish(s->bank, bt->slot, bt->ncalls);
    if (bt->ncalls > 0 && failpoint_hit("worker.after_bank_call") != GW_OK) {
        for (int k = 0; k < bt->m; k++)
            decide(&bt->d[bt->idx[k]], VERDICT_REQUEUE); /* nothing committed: all come back */
        return;
    }
    for (int k = 0, c = 0; k < bt->m; k++)
        triage(s, &bt->d[bt->idx[k]], bt->seen[k], bt->seen[k] ? NULL : &bt->calls[c++]);
    settle_pending(s, bt->d, bt->n);
    sync_duplicates(s, bt->d, bt->idx, bt->seen, bt->m);
}

/* Decide a batch, commit it, answer it. */
static gw_err close_batch(settle *s, batch_state *bt, backoff *db_backoff,
                          volatile sig_atomic_t *stop)
{
    bool requeued = false;
    gw_err err;

    decide_batch(s, bt);
    for (int i = 0; i < bt->n; i++)
        requeued = requeued || bt->d[i].v == VERDICT_REQUEUE;
    if (requeued && !*stop) {
        /* our side failed: wait before giving the messages back, so they do not spin */
        if (PQstatus(db_pg(s->db)) != CONNECTION_OK)
            health_set_db(s->health, false);
        backoff_wait(db_backoff, stop);
    } else if (!requeued) {
        backoff_reset(db_backoff);
    }
    if (failpoint_hit("worker.after_commit") != GW_OK)
        err = GW_ERR_MQ; /* "error": drop the connection without acking */
    else
        err = consumer_answer(s->mq, bt->d, bt->n);
    consumer_release(s->mq, bt->d, bt->n);
    bt->n = 0;
    return err;
}

/* The open batch will not be answered (the connection is being dropped): its deliveries return
 * to the queue, its bank answers no longer matter. */
static void forget_open(settle *s)
{
    batch_state *bt = s->open;

    if (bt == NULL)
        return;
    s->open = NULL;
    if (bt->checked)
        bank_abandon(s->bank, bt->slot, bt->ncalls);
    consumer_release(s->mq, bt->d, bt->n);
    bt->n = 0;
}

/*
 * Receive a batch and open it; close the one opened before. With an HTTP bank
 * the new batch's transfers are on their way while the older batch commits,
 * so the bank's round trip and the database's overlap; the new one stays open
 * until the next call.
 */
static gw_err consume_batch(settle *s, backoff *db_backoff, volatile sig_atomic_t *stop)
{
    /* half the prefetch: the other half streams in while this half commits, so the broker
     * never waits for our acks with nothing left to send; a third with a batch open, so the
     * prefetch holds the open one, the one received now and the next one streaming in */
    int part = s->cfg->worker_prefetch / (bank_pipelined(s->bank) ? 3 : 2);
    int max = part < 1 ? 1 : part < SETTLE_BATCH_MAX ? part : SETTLE_BATCH_MAX;
    batch_state *older = s->open, *bt = &s->batches[older == &s->batches[0] ? 1 : 0];
    gw_err err, closed = GW_OK;

    /* with a batch open, take only what has arrived: that batch must not wait for more */
    err = consumer_receive(s->mq, bt->d, max, older == NULL, &bt->n);
    if (bt->n > 0)
        s->delivered_ms = pace_now_ms();
    if (bt->n > 0)
        open_batch(s, bt);
    if (older != NULL) {
        s->open = NULL;
        closed = close_batch(s, older, db_backoff, stop);
    }
    if (bt->n == 0)
        return closed != GW_OK ? closed : err;
    s->open = bt;
    if (closed != GW_OK) {
        forget_open(s);
        return closed;
    }
    if (err != GW_OK || *stop || !bank_pipelined(s->bank)) {
        s->open = NULL;
        closed = close_batch(s, bt, db_backoff, stop);
    }
    return closed != GW_OK ? closed : err;
}

/*
 * Once a minute: forget inbox rows past the retention, in pieces (a backlog
 * after a long stop, or a busy day a month ago). While deliveries flow, a
 * piece is small and the purge takes at most a fifth of the time
 * (shared/lib/pace.h): a piece of 1,000 rows cold from disk took 60-100 ms,
 * and back to back they held every settlement behind them.
 */
static void housekeeping(settle *s)
{
    long now = pace_now_ms(), deleted = 0;
    bool busy = now - s->delivered_ms < 1000; /* deliveries in the last second */
    gw_err err;

    if (!pace_begin(&s->purge, now))
        return;
    err = inbox_purge(s->db, s->cfg->inbox_retention_days, busy ? PURGE_BUSY_ROWS : PURGE_IDLE_ROWS,
                      &deleted);
    if (err == GW_OK && deleted > 0)
        log_info("inbox_purged", "rows=%ld retention_days=%d busy=%d", deleted,
                 s->cfg->inbox_retention_days, busy);
    pace_end(&s->purge, pace_now_ms(), err == GW_OK && deleted > 0, busy);
}

void settle_run(settle *s, volatile sig_atomic_t *stop)
{
    backoff bo, db_bo;

    backoff_init(&bo, 200, 10000);
    backoff_init(&db_bo, 200, DB_RECONNECT_MAX_MS);
    while (!*stop) {
        if (connect_db(s) != GW_OK) {
            /* no deliveries while PostgreSQL is away: the ones in hand go back now, once,
             * instead of cycling through nack-requeue, each cycle counting towards a quorum
             * queue's delivery limit (docs/decisions.md, 20) */
            forget_open(s);
            drop_db(s);
            consumer_drop(s->mq);
            backoff_wait(&db_bo, stop);
            continue;
        }
        if (consumer_connect(s->mq) != GW_OK) {
            forget_open(s); /* its connection is gone, and its deliveries with it */
            backoff_wait(&bo, stop);
            continue;
        }
        backoff_reset(&bo);
        consumer_keepalive(s->mq);
        housekeeping(s);
        if (consume_batch(s, &db_bo, stop) != GW_OK) {
            forget_open(s);
            consumer_drop(s->mq); /* unacked deliveries return to the queue; the inbox dedupes */
        }
    }
    if (s->open != NULL) { /* the batch in hand is finished: COMMIT, then ack */
        batch_state *bt = s->open;

        s->open = NULL;
        if (close_batch(s, bt, &db_bo, stop) != GW_OK)
            consumer_drop(s->mq);
    }
    consumer_cancel(s->mq);
}
