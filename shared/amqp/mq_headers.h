/* shared/amqp/mq_headers.h - AMQP header tables as JSON, and the broker's x-death in the contract's
 * shape */
#ifndef SHARED_AMQP_MQ_HEADERS_H
#define SHARED_AMQP_MQ_HEADERS_H

#include <stdbool.h>
#include <stdint.h>

#include <amqp.h>
#include <jansson.h>

/*
 * mq_table_to_json - every entry of @t as a JSON member: integers as numbers,
 * strings as strings (invalid UTF-8 is hex-escaped, never dropped), timestamps
 * as RFC 3339, nested tables and arrays recursively (at most 8 levels).
 * New reference owned by the caller.
 */
json_t *mq_table_to_json(const amqp_table_t *t);

/* mq_field_int - @v as an integer when it is one of AMQP's eight integer kinds; false otherwise. */
bool mq_field_int(const amqp_field_value_t *v, int64_t *out);

/*
 * mq_x_death - the "x-death" member of @headers (borrowed, as made by
 * mq_table_to_json) as [{"queue","reason","count","exchange","routing_keys",
 * "time"}...]: an empty array when absent or malformed. New reference.
 */
json_t *mq_x_death(const json_t *headers);

#endif
