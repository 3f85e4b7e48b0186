/* shared/lib/sig.h - SIGTERM and SIGINT set a flag; the single-threaded loops check it */
#ifndef SHARED_LIB_SIG_H
#define SHARED_LIB_SIG_H

#include <signal.h>

/*
 * sig_install_stop - SIGTERM and SIGINT set *@flag (nothing else: the handler
 * runs at an arbitrary point), SIGPIPE is ignored. @flag must outlive the
 * program: a static in main's file.
 */
void sig_install_stop(volatile sig_atomic_t *flag);

#endif
