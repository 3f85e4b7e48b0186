/* worker/settle/curl_loop.h - a libcurl multi handle driven by epoll (libcurl's socket interface),
 * which another thread can wake */
#ifndef WORKER_SETTLE_CURL_LOOP_H
#define WORKER_SETTLE_CURL_LOOP_H

#include <curl/curl.h>

#include "shared/lib/err.h"

typedef struct curl_loop {
    CURLM *multi;
    int epoll_fd;          /* the sockets libcurl asks to be watched, and wake_fd */
    int wake_fd;           /* an eventfd */
    long long timer_at_ms; /* when libcurl wants its timeout action (CLOCK_MONOTONIC); -1: never */
    unsigned char *fds;    /* by descriptor: what curl_loop.c knows of it (FD_* there) */
    int nfds;
} curl_loop;

/* curl_loop_init - a multi handle with its epoll set; GW_ERR_NOMEM. curl_loop_free() after. */
GW_MUSTCHECK gw_err curl_loop_init(curl_loop *l);

/*
 * curl_loop_easy - let the loop open and close @easy's connections, so that it
 * knows when a descriptor's epoll entry can outlive a transfer: a kept-alive
 * connection stays in the epoll set between its transfers, instead of two
 * epoll_ctl() calls each. Every easy handle of the loop's multi must have it.
 */
void curl_loop_easy(curl_loop *l, CURL *easy);
void curl_loop_free(curl_loop *l); /* accepts one curl_loop_init() failed on */

/*
 * curl_loop_step - wait up to @wait_ms for a socket, libcurl's timer or a
 * wake-up, and let libcurl act on what happened: only the sockets that have
 * something to say are visited, not every connection. The ended transfers are
 * then in curl_multi_info_read(). The loop's thread only.
 */
void curl_loop_step(curl_loop *l, int wait_ms);

/* curl_loop_wake - end the loop's current or next wait; from any thread. */
void curl_loop_wake(curl_loop *l);

#endif
