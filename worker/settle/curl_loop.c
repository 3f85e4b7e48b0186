/* worker/settle/curl_loop.c - libcurl's socket interface on an epoll set, with an eventfd to wake
 * it */
#include "worker/settle/curl_loop.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shared/lib/log.h"

static long long now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* What the loop knows of a descriptor, in curl_loop.fds. */
enum {
    FD_OURS = 1,   /* opened by open_socket(), not yet closed: its entry in fds can be trusted */
    FD_IN = 2,     /* in the epoll set for EPOLLIN */
    FD_OUT = 4,    /* ... for EPOLLOUT */
    FD_PARKED = 8, /* libcurl no longer watches it (a connection kept for later): still in the
                    * set, taken out only when it has something to say */
};

/* The entry of @fd, the table grown as needed; NULL without memory. */
static unsigned char *fd_state(curl_loop *l, curl_socket_t fd)
{
    if (fd < 0)
        return NULL;
    if (fd >= l->nfds) {
        int n = l->nfds ? 2 * l->nfds : 256;
        unsigned char *t;

        while (n <= fd)
            n *= 2;
        if ((t = realloc(l->fds, (size_t)n)) == NULL)
            return NULL;
        memset(t + l->nfds, 0, (size_t)(n - l->nfds));
        l->fds = t;
        l->nfds = n;
    }
    return &l->fds[fd];
}

/* Put @s in the epoll set for @want (FD_IN | FD_OUT), or change what it is watched for. */
static void watch(curl_loop *l, curl_socket_t s, unsigned want, bool known)
{
    struct epoll_event ev = {.data.fd = s};

    ev.events = (want & FD_IN ? EPOLLIN : 0u) | (want & FD_OUT ? EPOLLOUT : 0u);
    if (epoll_ctl(l->epoll_fd, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev) != 0) {
        if (errno == EEXIST)
            epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, s, &ev);
        else if (errno == ENOENT)
            epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, s, &ev);
    }
}

/*
 * libcurl's socket callback: watch @s for what it waits for, or no longer. A
 * socket the loop opened stays in the set when libcurl lets it go, and its next
 * transfer finds it there: no epoll_ctl() per transfer on a kept connection.
 */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    curl_loop *l = userp;
    unsigned char *st = fd_state(l, s);
    unsigned want = (what & CURL_POLL_IN ? FD_IN : 0u) | (what & CURL_POLL_OUT ? FD_OUT : 0u);

    (void)easy;
    if (st != NULL && (*st & FD_OURS)) {
        if (what == CURL_POLL_REMOVE) {
            if (*st & (FD_IN | FD_OUT))
                *st |= FD_PARKED;
        } else if ((*st & (FD_IN | FD_OUT)) != want) {
            watch(l, s, want, (*st & (FD_IN | FD_OUT)) != 0);
            *st = (unsigned char)(FD_OURS | want);
        } else {
            *st &= (unsigned char)~FD_PARKED;
        }
        curl_multi_assign(l->multi, s, what == CURL_POLL_REMOVE ? NULL : l);
        return 0;
    }
    /* a socket libcurl opened itself (a resolver's): its closing is not told, so no memory */
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, s, NULL); /* it may be closed already */
        curl_multi_assign(l->multi, s, NULL);
        return 0;
    }
    watch(l, s, want, socketp != NULL);
    curl_multi_assign(l->multi, s, l); /* any non-NULL: "watched" */
    return 0;
}

/* libcurl's open-socket callback: a connection's socket, known to the loop from now on. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    curl_loop *l = clientp;
    curl_socket_t s = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    unsigned char *st = s >= 0 ? fd_state(l, s) : NULL;

    (void)purpose;
    if (st != NULL)
        *st = FD_OURS; /* a new descriptor is in no epoll set: its last holder left by close */
    return s < 0 ? CURL_SOCKET_BAD : s;
}

/* libcurl's close-socket callback: out of the set, forgotten, closed. */
static int close_socket(void *clientp, curl_socket_t s)
{
    curl_loop *l = clientp;
    unsigned char *st = fd_state(l, s);

    if (st != NULL && (*st & (FD_IN | FD_OUT)))
        epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, s, NULL);
    if (st != NULL)
        *st = 0;
    return close(s);
}

void curl_loop_easy(curl_loop *l, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, l);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, l);
}

/* libcurl's timer callback: when to call it back with CURL_SOCKET_TIMEOUT. */
static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    curl_loop *l = userp;

    (void)multi;
    l->timer_at_ms = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    return 0;
}

/*
 * Wait up to @wait_ms for a socket, the timer or a wake-up, and let libcurl
 * act on what happened: only the sockets that have something to say are
 * visited (libcurl's socket interface), not every connection of the batch.
 */
void curl_loop_step(curl_loop *l, int wait_ms)
{
    struct epoll_event ev[64];
    int n, running;
    long long now = now_ms();

    if (l->timer_at_ms >= 0 && l->timer_at_ms - now < wait_ms)
        wait_ms = l->timer_at_ms <= now ? 0 : (int)(l->timer_at_ms - now);
    n = epoll_wait(l->epoll_fd, ev, 64, wait_ms);
    for (int i = 0; i < n; i++) {
        int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                    (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                    (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        uint64_t count;

        int fd = ev[i].data.fd;

        if (fd == l->wake_fd) {
            if (read(l->wake_fd, &count, sizeof count) < 0 && errno != EAGAIN)
                log_warn("curl_loop_wake_failed", "errno=%d", errno);
            continue;
        }
        if (fd < l->nfds && (l->fds[fd] & FD_PARKED)) {
            /* a kept connection spoke (the bank closed it?): libcurl finds out on its reuse */
            epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
            l->fds[fd] = FD_OURS;
            continue;
        }
        curl_multi_socket_action(l->multi, fd, flags, &running);
    }
    if (l->timer_at_ms >= 0 && l->timer_at_ms <= now_ms()) {
        l->timer_at_ms = -1;
        curl_multi_socket_action(l->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
}

void curl_loop_wake(curl_loop *l)
{
    uint64_t one = 1;

    if (write(l->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        log_warn("curl_loop_wake_failed", "errno=%d", errno);
}

gw_err curl_loop_init(curl_loop *l)
{
    struct epoll_event ev = {.events = EPOLLIN};

    l->timer_at_ms = -1;
    l->fds = NULL;
    l->nfds = 0;
    l->multi = curl_multi_init();
    l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ev.data.fd = l->wake_fd;
    if (l->multi == NULL || l->epoll_fd < 0 || l->wake_fd < 0 ||
        epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->wake_fd, &ev) != 0)
        return GW_ERR_NOMEM;
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
    return GW_OK;
}

void curl_loop_free(curl_loop *l)
{
    if (l->multi != NULL)
        curl_multi_cleanup(l->multi);
    if (l->epoll_fd >= 0)
        close(l->epoll_fd);
    if (l->wake_fd >= 0)
        close(l->wake_fd);
    free(l->fds); /* after curl_multi_cleanup(): its connections close through close_socket() */
    l->fds = NULL;
    l->nfds = 0;
    l->multi = NULL;
    l->epoll_fd = l->wake_fd = -1;
}
