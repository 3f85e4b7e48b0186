/* tests/support/tsock.h - loopback TCP for tests: a connection, a listener on a free port */
#ifndef TESTS_SUPPORT_TSOCK_H
#define TESTS_SUPPORT_TSOCK_H

/* tsock_connect - a blocking TCP connection to 127.0.0.1:@port; -1 on failure. */
int tsock_connect(int port);

/*
 * tsock_listen - a listener on 127.0.0.1 at a port the kernel chose, with
 * @backlog; its port in *@port. -1 on failure (nothing left open).
 */
int tsock_listen(int backlog, int *port);

#endif
