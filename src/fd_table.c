// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "fd_table.h"

#define CHUNK_SLOTS (1u << FD_TABLE_CHUNK_SHIFT)

struct sock **fd_table_chunks[FD_TABLE_CHUNKS];

/*
 * One past the highest chunk ever allocated: walks stop there, so that a
 * process that tracks nothing never touches the chunk array.
 */
static unsigned int chunks_used;

static void note_chunk(unsigned int index)
{
	unsigned int used = __atomic_load_n(&chunks_used, __ATOMIC_RELAXED);

	while (used <= index && !__atomic_compare_exchange_n(
					&chunks_used, &used, index + 1, true,
					__ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

static unsigned int chunks_in_use(void)
{
	return __atomic_load_n(&chunks_used, __ATOMIC_ACQUIRE);
}

static struct sock **slot_of(int fd, bool create)
{
	unsigned int index = (unsigned int)fd >> FD_TABLE_CHUNK_SHIFT;
	struct sock **chunk, **fresh;

	if (fd < 0 || index >= FD_TABLE_CHUNKS)
		return NULL;
	/*
	 * Noted before anything is installed in the chunk, by every thread
	 * that installs: a walk that misses it misses only what comes later.
	 */
	if (create)
		note_chunk(index);
	chunk = __atomic_load_n(&fd_table_chunks[index], __ATOMIC_ACQUIRE);
	if (chunk || !create)
		return chunk ? &chunk[fd & (CHUNK_SLOTS - 1)] : NULL;
	fresh = calloc(CHUNK_SLOTS, sizeof(*fresh));
	if (!fresh)
		return NULL;
	if (!__atomic_compare_exchange_n(&fd_table_chunks[index], &chunk, fresh,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		free(fresh); /* another thread installed it first */
	else
		chunk = fresh;
	return &chunk[fd & (CHUNK_SLOTS - 1)];
}

struct sock *fd_table_get_slow(struct sock **slot)
{
	struct sock *sock;

	for (;;) {
		sock = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		if (!sock)
			return NULL;
		/* A failure means it is being released: the slot changes soon.
		 */
		if (sock_tryget(sock)) {
			if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == sock)
				return sock;
			sock_put(sock);
		}
	}
}

int fd_table_install(int fd, struct sock *sock)
{
	struct sock **slot;
	struct sock *old;

	if (fd < 0 || fd >= FD_TABLE_MAX)
		return -EBADF;
	slot = slot_of(fd, true);
	if (!slot)
		return -ENOMEM;
	sock_get(sock);
	old = __atomic_exchange_n(slot, sock, __ATOMIC_ACQ_REL);
	if (old)
		sock_put(old);
	return 0;
}

struct sock *fd_table_remove(int fd)
{
	struct sock **slot = slot_of(fd, false);

	if (!slot)
		return NULL;
	if (!__atomic_load_n(slot, __ATOMIC_RELAXED))
		return NULL;
	return __atomic_exchange_n(slot, NULL, __ATOMIC_ACQ_REL);
}

void fd_table_remove_range(unsigned int first, unsigned int last,
			   void (*release)(int fd, struct sock *sock))
{
	unsigned int fd, end = chunks_in_use() << FD_TABLE_CHUNK_SHIFT;

	if (!end || first >= end)
		return;
	if (last >= end)
		last = end - 1;
	for (fd = first; fd <= last; fd++) {
		struct sock *sock;

		/* Skip chunks never allocated: nothing was tracked there. */
		if (!__atomic_load_n(
			    &fd_table_chunks[fd >> FD_TABLE_CHUNK_SHIFT],
			    __ATOMIC_ACQUIRE)) {
			fd |= CHUNK_SLOTS - 1;
			continue;
		}
		sock = fd_table_remove(fd);
		if (sock)
			release((int)fd, sock);
	}
}

int fd_table_find(const struct sock *sock, int except)
{
	unsigned int index, i, used = chunks_in_use();

	for (index = 0; index < used; index++) {
		struct sock **chunk = __atomic_load_n(&fd_table_chunks[index],
						      __ATOMIC_ACQUIRE);

		if (!chunk)
			continue;
		for (i = 0; i < CHUNK_SLOTS; i++) {
			int fd = (int)(index << FD_TABLE_CHUNK_SHIFT | i);

			if (fd != except &&
			    __atomic_load_n(&chunk[i], __ATOMIC_ACQUIRE) ==
				    sock)
				return fd;
		}
	}
	return -1;
}

void fd_table_for_each(void (*fn)(int fd, struct sock *sock, void *arg),
		       void *arg)
{
	unsigned int index, i, used = chunks_in_use();

	for (index = 0; index < used; index++) {
		if (!__atomic_load_n(&fd_table_chunks[index], __ATOMIC_ACQUIRE))
			continue;
		for (i = 0; i < CHUNK_SLOTS; i++) {
			int fd = (int)(index << FD_TABLE_CHUNK_SHIFT | i);
			struct sock *sock = fd_table_get(fd);

			if (sock) {
				fn(fd, sock, arg);
				sock_put(sock);
			}
		}
	}
}
