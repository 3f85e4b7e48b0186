/* worker/settle/verdict.h - what becomes of a delivery, and the one table from that to an AMQP
 * answer */
#ifndef WORKER_SETTLE_VERDICT_H
#define WORKER_SETTLE_VERDICT_H

#include "worker/settle/inbox.h"

/* What to do with a delivery once it was looked at. */
typedef enum verdict {
    VERDICT_ACK,     /* settled now, or a duplicate: done */
    VERDICT_RETRY,   /* a confirmed copy went to the delay queue: ack the original */
    VERDICT_DEAD,    /* nack without requeue: the DLX writes x-death */
    VERDICT_REQUEUE, /* our side failed (database): give it back, try later */
} verdict;

/* The answer the broker gets; only worker/settle/consumer.c turns it into AMQP. */
typedef enum verdict_answer {
    VERDICT_ANSWER_ACK,          /* basic.ack: the broker forgets it */
    VERDICT_ANSWER_NACK_DROP,    /* basic.nack, requeue=0: to the DLX */
    VERDICT_ANSWER_NACK_REQUEUE, /* basic.nack, requeue=1: delivered again */
} verdict_answer;

/* verdict_of_outcome - the verdict for a delivery whose batch COMMIT gave it @o. */
verdict verdict_of_outcome(inbox_outcome o);

/* verdict_to_answer - the answer for @v: ack for ACK and RETRY, nack otherwise. */
verdict_answer verdict_to_answer(verdict v);

#endif
