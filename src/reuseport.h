/* SPDX-License-Identifier: MIT */
/*
 * Listeners that share their port (SO_REUSEPORT).  The kernel spreads
 * the TCP connections of such a port over its listeners, while only one
 * process can hold the port's RDMA CM listener.  That process, the
 * holder, names its share region (share.h) under an abstract unix name
 * that carries the port; every other listener on the port joins that
 * region, and its accept() claims there the connections the holder took
 * on the CM, which then move to TCP before their first byte.  Each
 * listener that joins is listed in the region; the holder refuses the
 * port's handshakes while a socket it does not know of listens there (a
 * process without roceshim, or one that could not join).
 *
 * Order makes it sound.  The holder binds its name, then checks that no
 * other socket listens on the port, and only then opens its CM listener.
 * A listener that listens later looks for the name after its own
 * listen(), so it finds the name; one that listened earlier is seen by
 * the check, and the port is not held.
 *
 * Contract: thread safe; errno is left alone.
 */
#ifndef ROCESHIM_REUSEPORT_H
#define ROCESHIM_REUSEPORT_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Before a listener (its socket's inode, listener) bound to port opens
 * its CM listener: names this process's share region for the port.  The
 * descriptor that holds the name, to close with reuseport_release() when the CM
 * listener goes; -EADDRINUSE where another socket listens on the port already,
 * or another negative errno where the name cannot be had.
 */
int reuseport_hold(uint16_t port, uint64_t listener);
void reuseport_release(int name_fd);
/* Fork child: the names are the parent's (unless fds_shared). */
void reuseport_fork_child(bool fds_shared);

#define REUSEPORT_JOINED_OWN   1u /* this process holds the port */
#define REUSEPORT_JOINED_OTHER 2u /* another process does */

/*
 * After listen(): maps the share regions of the processes that hold a
 * CM listener on port, and lists the listener (its socket's inode) there
 * as one that claims.  The REUSEPORT_JOINED_* bits of the holders it
 * joined; 0: none.
 */
unsigned int reuseport_join(uint16_t port, uint64_t listener);

/*
 * The holder, before it takes a handshake on port: how many sockets
 * besides its listener (inode holder) listen on the port without having
 * joined, and so could accept a connection it took without claiming it;
 * or a negative errno where that cannot be told.
 */
int reuseport_strangers(uint16_t port, uint64_t holder);

/* Where a holder's region is, as its name says. */
struct reuseport_holder {
	int pid;
	int fd;
	uint64_t ino;
};

/*
 * Parses one line of /proc/net/unix: whether its path names a holder of
 * port, and if so, where the holder's region is.
 */
bool reuseport_parse_line(const char *line, uint16_t port,
			  struct reuseport_holder *holder);

#endif /* ROCESHIM_REUSEPORT_H */
