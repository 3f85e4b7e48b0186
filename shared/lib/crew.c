/* shared/lib/crew.c - a few threads that share one lock and one condition, stopped together */
#include "shared/lib/crew.h"

void crew_init(crew *c)
{
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    c->stopping = false;
    c->n = 0;
}

bool crew_add(crew *c, void *(*fn)(void *), void *arg)
{
    if (c->n == CREW_MAX || pthread_create(&c->threads[c->n], NULL, fn, arg) != 0)
        return false;
    c->n++;
    return true;
}

void crew_stop(crew *c)
{
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->n; i++)
        pthread_join(c->threads[i], NULL);
    c->n = 0;
}

void crew_deinit(crew *c)
{
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
}
