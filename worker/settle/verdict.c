/* worker/settle/verdict.c - the verdict tables: pure, so tests/unit/test_verdict.c holds them */
#include "worker/settle/verdict.h"

verdict verdict_of_outcome(inbox_outcome o)
{
    switch (o) {
    case INBOX_SETTLED:   /* committed now */
    case INBOX_DUPLICATE: /* committed before: no second effect */
    case INBOX_TERMINAL:  /* dead-lettered before: nothing to do, and nothing written */
        return VERDICT_ACK;
    case INBOX_UNKNOWN: /* no such payment for this event: poison */
    default:
        return VERDICT_DEAD;
    }
}

verdict_answer verdict_to_answer(verdict v)
{
    switch (v) {
    case VERDICT_ACK:
    case VERDICT_RETRY: /* the confirmed copy carries it on */
        return VERDICT_ANSWER_ACK;
    case VERDICT_DEAD:
        return VERDICT_ANSWER_NACK_DROP;
    case VERDICT_REQUEUE:
    default:
        return VERDICT_ANSWER_NACK_REQUEUE;
    }
}
