/* shared/lib/sig.h - SIGTERM and SIGINT set a flag; the single-threaded loops check it */
#ifndef SHARED_LIB_SIG_H
#define SHARED_LIB_SIG_H

#include <signal.h>
#include <stdbool.h>

#include "shared/lib/err.h"

/*
 * sig_install_stop - SIGTERM and SIGINT set *@flag (nothing else: the handler
 * runs at an arbitrary point), SIGPIPE is ignored. @flag must outlive the
 * program: a static in main's file. False (logged as sig_install_failed) when
 * a disposition could not be set: the program must not start, since it could
 * not stop cleanly.
 */
GW_MUSTCHECK bool sig_install_stop(volatile sig_atomic_t *flag);

#endif
