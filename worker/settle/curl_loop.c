/* worker/settle/curl_loop.c - libcurl's socket interface on an epoll set, with an eventfd to wake
 * it */
#include "worker/settle/curl_loop.h"

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "shared/lib/log.h"

static long long now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* libcurl's socket callback: watch @s for what it waits for, or no longer. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    curl_loop *l = userp;
    struct epoll_event ev = {.data.fd = s};

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, s, NULL); /* it may be closed already */
        curl_multi_assign(l->multi, s, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    if (epoll_ctl(l->epoll_fd, socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev) != 0 &&
        errno == EEXIST)
        epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, s, &ev);
    curl_multi_assign(l->multi, s, l); /* any non-NULL: "watched" */
    return 0;
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

        if (ev[i].data.fd == l->wake_fd) {
            if (read(l->wake_fd, &count, sizeof count) < 0 && errno != EAGAIN)
                log_warn("curl_loop_wake_failed", "errno=%d", errno);
            continue;
        }
        curl_multi_socket_action(l->multi, ev[i].data.fd, flags, &running);
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
    l->multi = NULL;
    l->epoll_fd = l->wake_fd = -1;
}
