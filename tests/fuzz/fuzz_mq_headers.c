/* tests/fuzz/fuzz_mq_headers.c - AMQP header tables from the wire into JSON and x-death */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <amqp.h>

#include "shared/amqp/mq_headers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    amqp_bytes_t encoded = {size, (void *)data};
    amqp_pool_t pool;
    amqp_table_t table;
    size_t offset = 0;

    init_amqp_pool(&pool, 4096);
    if (amqp_decode_table(encoded, &pool, &table, &offset) == AMQP_STATUS_OK) {
        json_t *headers = mq_table_to_json(&table);
        json_t *deaths = mq_x_death(headers);
        char *text = json_dumps(headers, JSON_COMPACT);

        if (headers == NULL || !json_is_array(deaths))
            abort();
        free(text);
        json_decref(deaths);
        json_decref(headers);
    }
    empty_amqp_pool(&pool);
    return 0;
}
