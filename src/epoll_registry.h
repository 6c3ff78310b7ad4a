/* SPDX-License-Identifier: MIT */
/*
 * The registry of the program's epoll registrations that roceshim keeps
 * itself: those of upgraded connections, and those waiting for a connect
 * in the background (readiness_epoll.c).  An event loop holds one per
 * connection, thousands at a time, and looks them up on every epoll_ctl()
 * and on every event a completion brings, so each lookup costs O(1): by
 * set, fd and owner (the kernel's key: set, fd and file), by set and the
 * program's epoll_data (what an event carries), and by owner (the
 * connection's readiness, or the pending sock).
 *
 * Contract: not thread safe; the caller serialises every call.  Only
 * epoll_registry_add() allocates, and only epoll_registry_clear() frees,
 * so that a removal may run where an allocator may be locked (fork
 * handlers).  An entry keeps its address until it is removed or another
 * is added; an iteration may remove the entry it stands on, if it took
 * the next one first.
 */
#ifndef ROCESHIM_EPOLL_REGISTRY_H
#define ROCESHIM_EPOLL_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

struct readiness;
struct sock;

struct epoll_reg {
	int epfd;
	int fd;
	struct readiness *r; /* NULL: pending (a background connect) */
	struct sock *pending;
	uint64_t data;
	uint32_t events; /* the program's interest */
	bool disarmed;	 /* EPOLLONESHOT, fired: nothing until a MOD */
	/*
	 * fd was closed while a dup keeps the socket open: the kernel keeps
	 * the entry under the number, which names another file now, or none,
	 * and roceshim's own calls on the socket go through via, the dup.
	 */
	bool fd_gone;
	int via;
	/* The registry's own links (index + 1; 0 ends a chain). */
	unsigned int next_key, next_data, next_owner;
};

struct epoll_registry {
	struct epoll_reg *v;
	unsigned int used; /* entries of v ever handed out */
	unsigned int cap;
	unsigned int live;
	unsigned int free_head; /* removed entries, through next_key */
	unsigned int mask;	/* buckets - 1 */
	unsigned int *by_key, *by_data, *by_owner;
};

/* o's owner: its connection's readiness r, or its pending sock. */
const void *epoll_registry_owner(const struct epoll_reg *o);

/*
 * owner's registration through fd in epfd, or NULL.  Like the kernel, which
 * keys its entries by file and fd, the registry keeps one per socket that
 * held the number: a registered fd closed while a dup keeps its socket
 * open leaves its registration, and the number's next socket makes its own.
 */
struct epoll_reg *epoll_registry_find(const struct epoll_registry *g, int epfd,
				      int fd, const void *owner);

/*
 * Records a registration of fd in epfd by val's owner, which has none
 * there, with the fields of val (its links ignored).  NULL: out of memory.
 */
struct epoll_reg *epoll_registry_add(struct epoll_registry *g,
				     const struct epoll_reg *val);

/* Gives o the fields of val but its set and fd (a MOD). */
void epoll_registry_update(struct epoll_registry *g, struct epoll_reg *o,
			   const struct epoll_reg *val);

void epoll_registry_remove(struct epoll_registry *g, struct epoll_reg *o);

/*
 * Iterations, each from NULL: the registrations whose owner (r, or
 * pending if r is NULL) is owner; those in epfd with epoll_data data; all.
 */
struct epoll_reg *epoll_registry_next_owned(const struct epoll_registry *g,
					    const void *owner,
					    const struct epoll_reg *after);
struct epoll_reg *epoll_registry_next_with(const struct epoll_registry *g,
					   int epfd, uint64_t data,
					   const struct epoll_reg *after);
struct epoll_reg *epoll_registry_next(const struct epoll_registry *g,
				      const struct epoll_reg *after);

/* The registrations owned by owner. */
unsigned int epoll_registry_count_owned(const struct epoll_registry *g,
					const void *owner);

/* Frees it all; an empty registry is left. */
void epoll_registry_clear(struct epoll_registry *g);

#endif
