/* shared/lib/crew.h - a few threads that share one lock and one condition, stopped together */
#ifndef SHARED_LIB_CREW_H
#define SHARED_LIB_CREW_H

#include <pthread.h>
#include <stdbool.h>

#define CREW_MAX 8

/*
 * Embed a crew in the structure its threads work on: @lock guards that
 * structure, @wake tells its threads there is work (or a stop), and
 * @stopping is set under @lock by crew_stop().
 */
typedef struct crew {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping; /* under lock */
    int n;
    pthread_t threads[CREW_MAX];
} crew;

void crew_init(crew *c);

/* crew_add - start one more thread running @fn(@arg); false when it could not start. */
bool crew_add(crew *c, void *(*fn)(void *), void *arg);

/* crew_stop - set stopping under the lock, wake every thread and wait for each to end. */
void crew_stop(crew *c);

/* crew_deinit - after crew_stop(), or when no thread was ever added. */
void crew_deinit(crew *c);

#endif
