/* api/console/session.h - the console's logins: a session cookie for the admin token, with its
 * CSRF token, kept in memory (docs/console.md "Logging in") */
#ifndef API_CONSOLE_SESSION_H
#define API_CONSOLE_SESSION_H

#include <stdbool.h>
#include <time.h>

#include "shared/lib/err.h"

#define SESSION_COOKIE       "paygw_admin"
#define SESSION_ID_LEN       65 /* 32 random bytes as hex, and the NUL */
#define SESSION_OPERATOR_LEN 65 /* 1..64 of [A-Za-z0-9._@-], and the NUL */
#define SESSION_MAX_AGE_S    (12 * 3600)

typedef struct sessions sessions;

/* What a request may know of its session: copied out, so no lock outlives the call. */
typedef struct session_view {
    char operator[SESSION_OPERATOR_LEN];
    char csrf[SESSION_ID_LEN];
    time_t expires_at; /* the idle expiry, capped by the absolute one */
} session_view;

/* sessions_new - an empty table; a session lives @idle_s since its last use, 12 hours at most. */
GW_MUSTCHECK gw_err sessions_new(int idle_s, sessions **out);
void sessions_free(sessions *s); /* accepts NULL */

/* session_operator_valid - 1..64 of [A-Za-z0-9._@-]: safe in logs, headers and SQL text. */
bool session_operator_valid(const char *name);

/*
 * sessions_open - a new session for @operator (valid); its cookie value into @id
 * (SESSION_ID_LEN) and what the page may see into @view. GW_ERR_NOMEM when the table is
 * full even after expired sessions were dropped.
 */
GW_MUSTCHECK gw_err sessions_open(sessions *s, const char *operator, char * id, session_view *view);

/*
 * sessions_find - the live session whose id is in the Cookie header @cookie (may be NULL):
 * true, its view into @view (may be NULL) and its idle clock restarted. False otherwise.
 */
bool sessions_find(sessions *s, const char *cookie, session_view *view);

/* sessions_close - forget the session of @cookie; whether there was one. */
bool sessions_close(sessions *s, const char *cookie);

#endif
