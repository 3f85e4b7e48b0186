/* shared/lib/sig.c - Postfix's rule: a signal handler sets a flag and does nothing else */
#include "shared/lib/sig.h"

#include <errno.h>
#include <string.h>

#include "shared/lib/log.h"

static volatile sig_atomic_t *stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    *stop_flag = 1;
}

bool sig_install_stop(volatile sig_atomic_t *flag)
{
    struct sigaction sa;
    const char *which = NULL;

    stop_flag = flag;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        which = "SIGTERM";
    else if (sigaction(SIGINT, &sa, NULL) != 0)
        which = "SIGINT";
    else if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        which = "SIGPIPE";
    if (which != NULL)
        log_error("sig_install_failed", "signal=%s error=\"%s\"", which, strerror(errno));
    return which == NULL;
}
