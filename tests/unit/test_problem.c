/* tests/unit/test_problem.c - the RFC 9457 body of every error answer */
#include <string.h>

#include <jansson.h>

#include "api/problem.h"
#include "tests/support/tcheck.h"

static void test_plain_problem(void)
{
    json_t *p = problem_new(409, "payment-already-decided", "Payment Already Decided",
                            "this payment_id already has a decision", NULL);

    CHECK(json_is_object(p));
    CHECK_STR(json_string_value(json_object_get(p, "type")),
              "https://paygw.example/problems/payment-already-decided");
    CHECK_STR(json_string_value(json_object_get(p, "title")), "Payment Already Decided");
    CHECK(json_is_integer(json_object_get(p, "status")));
    CHECK_INT(json_integer_value(json_object_get(p, "status")), 409);
    CHECK_STR(json_string_value(json_object_get(p, "detail")),
              "this payment_id already has a decision");
    CHECK(json_object_get(p, "errors") == NULL); /* only validation problems list errors */
    CHECK_INT(json_object_size(p), 4);
    json_decref(p);
}

static void test_validation_problem(void)
{
    field_errors errs = {0};
    json_t *p, *list;

    errs.n = 2;
    strcpy(errs.e[0].pointer, "/amount_cents");
    strcpy(errs.e[0].detail, "is required");
    strcpy(errs.e[1].pointer, "/payee/extra");
    strcpy(errs.e[1].detail, "is not a known field");
    p = problem_new(422, "validation-failed", "Validation Failed", "see errors", &errs);
    CHECK_STR(json_string_value(json_object_get(p, "type")),
              "https://paygw.example/problems/validation-failed");
    CHECK_INT(json_integer_value(json_object_get(p, "status")), 422);
    list = json_object_get(p, "errors");
    if (CHECK(json_is_array(list)) && CHECK_INT(json_array_size(list), 2)) {
        CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "pointer")),
                  "/amount_cents");
        CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "detail")),
                  "is required");
        CHECK_STR(json_string_value(json_object_get(json_array_get(list, 1), "pointer")),
                  "/payee/extra");
        CHECK_INT(json_object_size(json_array_get(list, 1)), 2);
    }
    json_decref(p);

    errs.n = 0; /* an empty list is still a list */
    p = problem_new(422, "validation-failed", "Validation Failed", "see errors", &errs);
    CHECK(json_is_array(json_object_get(p, "errors")));
    CHECK_INT(json_array_size(json_object_get(p, "errors")), 0);
    json_decref(p);
}

int main(void)
{
    TRUN(test_plain_problem);
    TRUN(test_validation_problem);
    return tcheck_summary("test_problem");
}
