/* shared/lib/err.h - the one error convention of paygw */
#ifndef SHARED_LIB_ERR_H
#define SHARED_LIB_ERR_H

typedef enum gw_err {
    GW_OK = 0,
    GW_ERR_INVALID,   /* bad input: 4xx, never retried */
    GW_ERR_NOT_FOUND, /* no such row or route */
    GW_ERR_CONFLICT,  /* unique violation, idempotency replay, duplicate message */
    GW_ERR_RETRY,     /* transient: serialization failure, timeout, broker busy */
    GW_ERR_DB,        /* PostgreSQL unavailable or failed */
    GW_ERR_MQ,        /* RabbitMQ unavailable or failed */
    GW_ERR_NOMEM,
} gw_err;

#define GW_MUSTCHECK __attribute__((warn_unused_result))

/*
 * GW_BUILT - the end of a constructor: on GW_OK hand @obj to the caller
 * (*@out), otherwise undo what was built with its own destructor @destroy
 * (which accepts a half-built object) and pass @err on.
 */
#define GW_BUILT(err, obj, destroy, out)                                                           \
    ((err) == GW_OK ? (*(out) = (obj), GW_OK) : (destroy(obj), (err)))

/* gw_err_str - a stable, static name for @err ("ok", "invalid", ...). */
const char *gw_err_str(gw_err err);

#endif
