/* tests/unit/test_verdict.c - what each outcome becomes, and what each verdict tells the broker */
#include "tests/support/tcheck.h"
#include "worker/settle/verdict.h"

static void test_outcome_to_verdict(void)
{
    CHECK_INT(verdict_of_outcome(INBOX_SETTLED), VERDICT_ACK);
    CHECK_INT(verdict_of_outcome(INBOX_DUPLICATE), VERDICT_ACK); /* no second effect */
    CHECK_INT(verdict_of_outcome(INBOX_TERMINAL), VERDICT_ACK);  /* dead-lettered before */
    CHECK_INT(verdict_of_outcome(INBOX_UNKNOWN), VERDICT_DEAD);  /* poison: to the DLQ */
}

static void test_verdict_to_answer(void)
{
    CHECK_INT(verdict_to_answer(VERDICT_ACK), VERDICT_ANSWER_ACK);
    CHECK_INT(verdict_to_answer(VERDICT_RETRY), VERDICT_ANSWER_ACK); /* the copy carries it */
    CHECK_INT(verdict_to_answer(VERDICT_DEAD), VERDICT_ANSWER_NACK_DROP);
    CHECK_INT(verdict_to_answer(VERDICT_REQUEUE), VERDICT_ANSWER_NACK_REQUEUE);
}

int main(void)
{
    TRUN(test_outcome_to_verdict);
    TRUN(test_verdict_to_answer);
    return tcheck_summary("verdict");
}
