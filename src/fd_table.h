/* SPDX-License-Identifier: MIT */
/*
 * The fd table: which fds name a tracked socket.
 *
 * Contract: lookups are lock-free and safe against concurrent install,
 * remove and close from other threads; a lookup of an untracked fd costs
 * two loads.  fd_table_get() returns the sock with a reference the caller
 * drops with sock_put().  The table holds one reference per fd.  Memory of
 * the table is never freed, so a racing reader never touches freed memory.
 * fds at or above FD_TABLE_MAX are never tracked.
 */
#ifndef ROCESHIM_FD_TABLE_H
#define ROCESHIM_FD_TABLE_H

#include "sock.h"

#define FD_TABLE_CHUNK_SHIFT 12
#define FD_TABLE_CHUNKS	     1024
#define FD_TABLE_MAX	     (FD_TABLE_CHUNKS << FD_TABLE_CHUNK_SHIFT)

/* Each chunk is an array of 1 << FD_TABLE_CHUNK_SHIFT atomic pointers. */
extern struct sock **fd_table_chunks[FD_TABLE_CHUNKS];

/* fd_table_get() where the slot changed under it: a retry. */
struct sock *fd_table_get_slow(struct sock **slot);

/* Inline so that an untracked fd costs two loads and no call. */
static inline struct sock *fd_table_get(int fd)
{
	unsigned int index = (unsigned int)fd >> FD_TABLE_CHUNK_SHIFT;
	struct sock **chunk, **slot;
	struct sock *sock;

	if (index >= FD_TABLE_CHUNKS)
		return NULL;
	chunk = __atomic_load_n(&fd_table_chunks[index], __ATOMIC_ACQUIRE);
	if (!chunk)
		return NULL;
	slot = &chunk[fd & ((1 << FD_TABLE_CHUNK_SHIFT) - 1)];
	sock = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!sock)
		return NULL;
	/* The sock may have been recycled for another fd: the slot says. */
	if (__builtin_expect(sock_tryget(sock), 1)) {
		if (__builtin_expect(
			    __atomic_load_n(slot, __ATOMIC_ACQUIRE) == sock, 1))
			return sock;
		sock_put(sock);
	}
	return fd_table_get_slow(slot);
}

/*
 * Makes fd name sock, taking a reference of its own; whatever fd named
 * before is released.  Returns 0, -EBADF for an fd out of range or -ENOMEM.
 */
int fd_table_install(int fd, struct sock *sock);

/* Forgets fd; returns the sock it named (the caller owns that reference). */
struct sock *fd_table_remove(int fd);

/*
 * Forgets every fd in [first, last]; release() gets each one's sock with
 * the table's reference.
 */
void fd_table_remove_range(unsigned int first, unsigned int last,
			   void (*release)(int fd, struct sock *sock));

/*
 * An fd other than except that names sock, or -1.  A scan of the table:
 * for rare events (a socket's fd closed while a dup of it lives on).
 */
int fd_table_find(const struct sock *sock, int except);

/* Calls fn for every tracked fd, with a reference held for the call. */
void fd_table_for_each(void (*fn)(int fd, struct sock *sock, void *arg),
		       void *arg);

#endif /* ROCESHIM_FD_TABLE_H */
