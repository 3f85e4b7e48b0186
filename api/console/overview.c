/* api/console/overview.c - the overview: a few indexed counts and the queues' depths */
#include "api/console/overview.h"

#include <stdlib.h>
#include <string.h>

#include "api/problem.h"
#include "shared/mq_topology.h"
#include "shared/pg/pg_json.h"

#define POOL_WAIT_MS 2000

/* outbox_backlog() (sql/0021), inbox_processed_at and the dead letters' primary key keep these
 * cheap */
static const char overview_sql[] =
    "SELECT b.pending, b.oldest_age_seconds, "
    "(SELECT count(*) FROM inbox WHERE processed_at > now() - interval '60 seconds'), "
    "(SELECT count(*) FROM dead_letters), "
    "(SELECT count(*) FROM dead_letters WHERE replayed_at IS NULL) FROM outbox_backlog() b";

void overview_reply(db_pool *pool, dlq *d, api_metrics *m, http_request *r)
{
    db_conn *db = NULL;
    PGresult *res;
    json_t *queues, *dlq_broker = json_null(), *q;
    double age;
    size_t i;

    if (db_pool_acquire(pool, POOL_WAIT_MS, &db) != GW_OK) {
        problem_reply_unavailable(r, m, "the database is unavailable");
        return;
    }
    res = PQexec(db_pg(db), overview_sql);
    db_pool_release(pool, db);
    if (db_check(res, PGRES_TUPLES_OK, "overview") != GW_OK) {
        PQclear(res);
        problem_reply_unavailable(r, m, "the database is unavailable");
        return;
    }
    age = strtod(PQgetvalue(res, 0, 1), NULL); /* 0 when nothing is pending */
    queues = dlq_queue_depths(d);
    json_array_foreach(queues, i, q)
    {
        const char *name = json_string_value(json_object_get(q, "name"));
        if (name != NULL && strcmp(name, MQ_QUEUE_DLQ) == 0)
            dlq_broker = json_incref(json_object_get(q, "messages"));
    }
    http_reply_json(r, 200,
                    json_pack("{s:{s:I,s:o},s:o,s:{s:o,s:I,s:I},s:I,s:f}", "outbox", "pending",
                              pg_json_int(res, 0, 0), "oldest_pending_seconds",
                              age > 0 ? json_real(age) : json_integer(0), "queues",
                              queues != NULL ? queues : json_null(), "dlq", "broker", dlq_broker,
                              "stored", pg_json_int(res, 0, 3), "not_replayed",
                              pg_json_int(res, 0, 4), "settled_last_minute", pg_json_int(res, 0, 2),
                              "settle_rate_per_s", (double)pg_json_int(res, 0, 2) / 60.0),
                    NULL);
    PQclear(res);
}
