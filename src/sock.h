/* SPDX-License-Identifier: MIT */
/*
 * The state roceshim keeps for one kernel TCP socket (AF_INET/AF_INET6,
 * SOCK_STREAM).  Several fds may name one sock (dup); the fd table holds a
 * reference per fd and every call that uses a sock holds one for its
 * duration.
 *
 * Contract: socks come from a type-stable pool: their memory is never
 * returned to malloc, so sock_tryget() on a pointer that was just released
 * is safe (it fails, or succeeds on a recycled sock that the caller then
 * re-validates).  When the last reference goes, the sock's stats row is
 * marked closed and the sock goes back to the pool.
 */
#ifndef ROCESHIM_SOCK_H
#define ROCESHIM_SOCK_H

#include <stdbool.h>
#include <stddef.h>

#include <roceshim/stats.h>

struct conn;
struct connector;
struct rdma_cm_id;

struct sock {
	int refs;	/* atomic */
	int domain;	/* AF_INET or AF_INET6 */
	int published;	/* atomic: sock_publish() ran */
	int connecting; /* atomic: non-blocking connect in progress */
	enum roceshim_reason connect_reason; /* that connect's decision */
	struct conn *conn; /* atomic: the RDMA connection once upgraded */
	struct connector *connector;  /* atomic: a connect in the background */
	struct rdma_cm_id *listen_id; /* atomic: the CM listener beside it */
	/*
	 * Atomic: why a listener took no CM listener; its accepted
	 * connections stay on TCP for that reason.
	 */
	enum roceshim_reason listen_reason;
	int64_t listen_since_ms; /* when that listener started */
	/*
	 * Atomic: its CM listener is gone, but RDMA connections it took may
	 * still wait for accept() (handshake_unlisten()).
	 */
	bool orphans;
	const void *orphans_key; /* atomic: which CM listener took them */
	/*
	 * A listener handed over an exec by a descendant of its owner: the
	 * connections its owner's CM listener took are in the imported
	 * share region (share_import()).
	 */
	bool imported;
	/*
	 * Atomic: a listener that shares its port (SO_REUSEPORT) with
	 * another listener's CM listener, whose share region it joined: the
	 * REUSEPORT_JOINED_* bits of that listener's process (reuseport.h).
	 */
	unsigned int joined;
	bool abortive;	   /* closed with SO_LINGER {1, 0}: no FIN */
	bool spawn_dup;	   /* named in a posix_spawn file action */
	bool stdio_stream; /* atomic: fdopen() made a stream of it */
	bool dial_again;   /* a blocking connect asks again once TCP is up */
	int sndbuf;  /* atomic: SO_SNDBUF as the kernel has it; 0: not set */
	int tcp_inq; /* atomic: TCP_INQ as the kernel has it; -1: not read */
	/*
	 * atomic: the receive timestamp the kernel socket has on
	 * (sockopt_rx_timestamp_on()); -1: not read
	 */
	int rx_timestamp;
	int row; /* stats row, -1 for none; atomic, set once */
	/*
	 * A listener bound to one address: the local end of every connection
	 * it accepts, known without asking the kernel.
	 */
	struct roceshim_stats_endpoint bound;
	bool bound_known; /* atomic: bound is set */
	struct sock *next_free;
};

/* A new sock with one reference, or NULL when memory is short. */
struct sock *sock_new(int domain);
/*
 * A reference, unless the last one is gone (the sock is being released).
 * Inline: every data call's lookup takes one.
 */
static inline bool sock_tryget(struct sock *sock)
{
	int refs = __atomic_load_n(&sock->refs, __ATOMIC_RELAXED);

	do {
		if (!refs)
			return false;
	} while (!__atomic_compare_exchange_n(&sock->refs, &refs, refs + 1,
					      true, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return true;
}

void sock_get(struct sock *sock);
/* Drops a reference; the release of the last one leaves errno alone. */
void sock_put(struct sock *sock);

/*
 * Publishes the sock in the stats: a row for this connection or listener.
 * Only the first call for a sock takes effect.
 */
void sock_publish(struct sock *sock, int fd, enum roceshim_role role,
		  enum roceshim_row_state state, enum roceshim_reason reason,
		  const struct roceshim_stats_endpoint *local,
		  const struct roceshim_stats_endpoint *peer);

/* Moves the sock's stats row to a new state (connecting -> open, ...). */
void sock_set_state(struct sock *sock, enum roceshim_row_state state);

/* The sock's stats row, or -1. */
static inline int sock_row(const struct sock *sock)
{
	return __atomic_load_n(&sock->row, __ATOMIC_ACQUIRE);
}

/* Locks the pool across fork so the child never sees it half-updated. */
void sock_pool_lock(void);
void sock_pool_unlock(void);

#endif /* ROCESHIM_SOCK_H */
