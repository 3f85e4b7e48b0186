/* api/console/session.c - a small fixed table of sessions under one lock */
#include "api/console/session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "shared/lib/token.h"

#define SESSIONS_MAX 256 /* operators, not users: a full table refuses a login, never evicts */

typedef struct session {
    char id[SESSION_ID_LEN]; /* "" when the slot is free */
    session_view view;
    time_t opened_at;
} session;

struct sessions {
    pthread_mutex_t lock;
    int idle_s;
    session slot[SESSIONS_MAX];
};

gw_err sessions_new(int idle_s, sessions **out)
{
    sessions *s = calloc(1, sizeof *s);

    if (s == NULL)
        return GW_ERR_NOMEM;
    pthread_mutex_init(&s->lock, NULL);
    s->idle_s = idle_s;
    *out = s;
    return GW_OK;
}

void sessions_free(sessions *s)
{
    if (s == NULL)
        return;
    sodium_memzero(s->slot, sizeof s->slot);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

bool session_operator_valid(const char *name)
{
    size_t n = strlen(name);

    return n >= 1 && n < SESSION_OPERATOR_LEN &&
           strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@-") == n;
}

static bool expired(const session *x, time_t now)
{
    return x->id[0] != '\0' && now >= x->view.expires_at;
}

static void touch(sessions *s, session *x, time_t now)
{
    time_t cap = x->opened_at + SESSION_MAX_AGE_S;

    x->view.expires_at = now + s->idle_s < cap ? now + s->idle_s : cap;
}

gw_err sessions_open(sessions *s, const char *operator, char * id, session_view *view)
{
    time_t now = time(NULL);
    session *free_slot = NULL;

    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < SESSIONS_MAX; i++) {
        session *x = &s->slot[i];
        if (expired(x, now))
            memset(x, 0, sizeof *x);
        if (x->id[0] == '\0' && free_slot == NULL)
            free_slot = x;
    }
    if (free_slot != NULL) {
        token_random_hex(free_slot->id, 32);
        token_random_hex(free_slot->view.csrf, 32);
        snprintf(free_slot->view.operator, sizeof free_slot->view.operator, "%s", operator);
        free_slot->opened_at = now;
        touch(s, free_slot, now);
        memcpy(id, free_slot->id, SESSION_ID_LEN);
        *view = free_slot->view;
    }
    pthread_mutex_unlock(&s->lock);
    return free_slot != NULL ? GW_OK : GW_ERR_NOMEM;
}

/* The cookie's value in the Cookie header @h ("a=1; paygw_admin=...; b=2"), into @id. */
static bool cookie_value(const char *h, char *id)
{
    static const char name[] = SESSION_COOKIE "=";
    const char *p = h;

    while (p != NULL && *p != '\0') {
        p += strspn(p, " \t");
        if (strncmp(p, name, sizeof name - 1) == 0) {
            const char *v = p + sizeof name - 1;
            size_t n = strcspn(v, "; \t");
            if (n != SESSION_ID_LEN - 1)
                return false;
            memcpy(id, v, n);
            id[n] = '\0';
            return true;
        }
        p = strchr(p, ';');
        if (p != NULL)
            p++;
    }
    return false;
}

/* Under s->lock: the live session of @cookie, or NULL. */
static session *lookup(sessions *s, const char *cookie, time_t now)
{
    char id[SESSION_ID_LEN];

    if (cookie == NULL || !cookie_value(cookie, id))
        return NULL;
    for (int i = 0; i < SESSIONS_MAX; i++) {
        session *x = &s->slot[i];
        if (x->id[0] == '\0')
            continue;
        if (sodium_memcmp(x->id, id, SESSION_ID_LEN - 1) != 0)
            continue;
        if (expired(x, now)) {
            memset(x, 0, sizeof *x);
            return NULL;
        }
        return x;
    }
    return NULL;
}

bool sessions_find(sessions *s, const char *cookie, session_view *view)
{
    time_t now = time(NULL);
    session *x;

    pthread_mutex_lock(&s->lock);
    if ((x = lookup(s, cookie, now)) != NULL) {
        touch(s, x, now);
        if (view != NULL)
            *view = x->view;
    }
    pthread_mutex_unlock(&s->lock);
    return x != NULL;
}

bool sessions_close(sessions *s, const char *cookie)
{
    session *x;

    pthread_mutex_lock(&s->lock);
    if ((x = lookup(s, cookie, time(NULL))) != NULL)
        memset(x, 0, sizeof *x);
    pthread_mutex_unlock(&s->lock);
    return x != NULL;
}
