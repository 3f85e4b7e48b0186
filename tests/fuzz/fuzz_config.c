/* tests/fuzz/fuzz_config.c - every parser of a configuration value */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shared/config.h"
#include "shared/failpoint.h"
#include "worker/settle/bank_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), why[200];
    int delays[CONFIG_MAX_RETRY_STEPS], n = 0;
    listen_addr addr;
    bank b;

    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (config_parse_delays(s, delays, &n) && (n < 1 || n > CONFIG_MAX_RETRY_STEPS))
        abort();
    (void)config_parse_listen(s, &addr);
    (void)failpoint_validate(s, why, sizeof why);
    if (bank_sim_new(s, &b, why, sizeof why) == GW_OK)
        bank_free(&b);
    free(s);
    return 0;
}
