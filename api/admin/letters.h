/* api/admin/letters.h - the dead_letters table: a letter stored with its headers, body and
 * x-death; listed, fetched and locked for a replay; and its JSON as the contract shows it */
#ifndef API_ADMIN_LETTERS_H
#define API_ADMIN_LETTERS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "api/admin/dlq_broker.h"
#include "shared/pg/db.h"

/* A letter's id as text: a bigint and its NUL. */
#define LETTERS_ID_LEN 24

/*
 * letters_store - INSERT the letter that @m (borrowed) carries, or find it when it was
 * drained before (its dedupe key: message id, headers and body); its id into @id
 * (LETTERS_ID_LEN). Runs in the caller's transaction.
 */
GW_MUSTCHECK gw_err letters_store(db_conn *db, const dlq_broker_msg *m, char *id);

/* letters_by_ids - the letters whose ids are in @ids (a bigint[] literal), by id; *@out owned. */
GW_MUSTCHECK gw_err letters_by_ids(db_conn *db, const char *ids, json_t **out);

/* What a list of letters is narrowed to; NULL members match any letter. */
typedef struct letters_filter {
    const char *event_id, *payment_id;
    const char *group; /* a group's key (letters_groups()) */
    const char *q;     /* a substring of the error (any case), the event id or the payment id */
} letters_filter;

/*
 * letters_page - up to @limit letters that match @f, newest first, with ids below @after (0:
 * from the newest). *@items owned: the array; *@next owned: the cursor of the next page as a
 * string, or JSON null on the last page.
 */
GW_MUSTCHECK gw_err letters_page(db_conn *db, const letters_filter *f, long after, long limit,
                                 json_t **items, json_t **next);

/*
 * letters_groups - the letters grouped by first death reason and error class (sql/0016),
 * the latest first: each group's key, reason, error, count, not-replayed count and first and
 * last death. *@out owned.
 */
#define LETTERS_GROUPS_MAX_S "500"
GW_MUSTCHECK gw_err letters_groups(db_conn *db, json_t **out);

/* letters_get - the letter @id (decimal); *@out owned. GW_ERR_NOT_FOUND when there is none. */
GW_MUSTCHECK gw_err letters_get(db_conn *db, const char *id, json_t **out);

/* A letter locked for its replay. The strings borrow from res and live until the clear. */
typedef struct letters_locked {
    PGresult *res;           /* owned: letters_locked_clear() */
    const char *event_id;    /* "" when unknown */
    const char *message_id;  /* NULL: none */
    const char *routing_key; /* "" when unknown */
    const char *body;        /* raw bytes, body_len of them */
    size_t body_len;
    const char *traceparent; /* NULL: none */
    bool expired;            /* older than the replay window */
    bool replayed;           /* replayed before */
} letters_locked;

/*
 * letters_lock - SELECT ... FOR UPDATE the letter @id (decimal) in the caller's transaction,
 * so two replays of one letter cannot both publish; @retention_days is the replay window.
 * GW_ERR_NOT_FOUND when there is none. Clear @out in every case.
 */
GW_MUSTCHECK gw_err letters_lock(db_conn *db, const char *id, int retention_days,
                                 letters_locked *out);
void letters_locked_clear(letters_locked *l);

/*
 * letters_mark_replayed - record the replay of @id by @actor and move the payment of
 * @event_id from dead_lettered to published, in the caller's transaction; with @job (not
 * NULL), the replay job's result for the letter too.
 */
GW_MUSTCHECK gw_err letters_mark_replayed(db_conn *db, const char *id, const char *actor,
                                          const char *event_id, const char *job);

#endif
