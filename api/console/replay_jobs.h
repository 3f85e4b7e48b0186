/* api/console/replay_jobs.h - replaying many dead letters as one recorded, paced job
 * (docs/console.md "Replay jobs") */
#ifndef API_CONSOLE_REPLAY_JOBS_H
#define API_CONSOLE_REPLAY_JOBS_H

#include "api/admin/dlq.h"
#include "api/api_metrics.h"
#include "shared/config.h"
#include "shared/http/http.h"
#include "shared/pg/db_pool.h"

typedef struct replay_jobs replay_jobs;

/*
 * replay_jobs_start - the thread that works the jobs, at most @cfg->replay_rate letters a
 * second, on a PostgreSQL connection of its own; it resumes the jobs a previous run left
 * open. @cfg, @d, @pool and @m are borrowed and outlive the thread.
 */
GW_MUSTCHECK gw_err replay_jobs_start(const gw_config *cfg, dlq *d, db_pool *pool, api_metrics *m,
                                      replay_jobs **out);
void replay_jobs_stop(replay_jobs *j); /* joins the thread; accepts NULL */

/* POST /admin/replays: {"ids": [..]} or {"group": key}; recorded as @operator. 202 {id,...}. */
void replay_jobs_create(replay_jobs *j, http_request *r, const char *operator);

/* GET /admin/replays: the latest jobs with their progress. */
void replay_jobs_list(replay_jobs *j, http_request *r);

/* GET /admin/replays/{id}?after=&limit=: one job and its letters' results. */
void replay_jobs_get(replay_jobs *j, http_request *r, const char *id);

#endif
