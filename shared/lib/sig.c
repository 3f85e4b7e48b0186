/* shared/lib/sig.c - Postfix's rule: a signal handler sets a flag and does nothing else */
#include "shared/lib/sig.h"

#include <string.h>

static volatile sig_atomic_t *stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    *stop_flag = 1;
}

void sig_install_stop(volatile sig_atomic_t *flag)
{
    struct sigaction sa;

    stop_flag = flag;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}
