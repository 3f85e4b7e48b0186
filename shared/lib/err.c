/* shared/lib/err.c - names of gw_err values */
#include "shared/lib/err.h"

const char *gw_err_str(gw_err err)
{
    switch (err) {
    case GW_OK:
        return "ok";
    case GW_ERR_INVALID:
        return "invalid";
    case GW_ERR_NOT_FOUND:
        return "not_found";
    case GW_ERR_CONFLICT:
        return "conflict";
    case GW_ERR_RETRY:
        return "retry";
    case GW_ERR_DB:
        return "db";
    case GW_ERR_MQ:
        return "mq";
    case GW_ERR_NOMEM:
        return "nomem";
    }
    return "unknown";
}
