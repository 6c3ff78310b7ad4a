/* SPDX-License-Identifier: MIT */
/*
 * Inside the conn module: the connection's state, shared by conn.c (its
 * life and the routing of each call), conn_rdma.c (calls carried over
 * RDMA) and conn_move.c (the move to the kernel socket).  Not for other
 * modules.
 */
#ifndef ROCESHIM_CONN_IMPL_H
#define ROCESHIM_CONN_IMPL_H

#include <pthread.h>

#include "conn.h"
#include "move_wait.h"
#include "progress.h"
#include "reg_cache.h"
#include "share.h"
#include "spin.h"
#include "wire.h"

/* Where the connection's bytes go (c->path, atomic). */
enum conn_path {
	CONN_RDMA,   /* over the queue pair */
	CONN_MOVING, /* frozen: the markers are on their way */
	CONN_TCP,    /* over the kernel socket (c->backlog first) */
	CONN_FAILED  /* the move failed: reset */
};

struct conn {
	struct rdma_cm_id *id;
	struct transport *t;
	struct readiness *r;
	struct spin_policy rx_spin; /* waits for data */
	struct spin_policy tx_spin; /* waits for credit */
	/* Atomic, the send turn (conn_rdma.c): */
	const void *sending;	   /* the small send that has it */
	unsigned int turns;	   /* turns taken so far */
	unsigned int turn_waiters; /* small sends waiting for it */
	size_t zerocopy_min;	   /* 0: every send is copied */
	size_t pinned_min;	   /* 0: pinned memory is copied too */
	size_t reg_cache_bytes;	   /* conn_options.reg_cache_bytes */
	struct reg_cache *pinned;  /* atomic: made on first use */
	int64_t pinned_retry_ms;   /* atomic: copy pinned memory until */
	bool zerocopy_failed;	   /* atomic: logged once */
	unsigned int fork_epoch;   /* conn_fork_epoch when created */
	struct share_slot *slot;   /* its state for fork children */
	int row;		   /* atomic: its stats row, -1 for none */
	uint64_t pinned_told;	   /* under t's lock: in the process's gauge */
	int timeout_ms;		   /* the longest a move may take */
	uint16_t accepted_port;	   /* conn_options.accepted_port */

	int path;	  /* atomic: enum conn_path */
	bool peer_closed; /* atomic: the peer's kernel socket is closed */
	bool peer_reset;  /* atomic: it was reset */
	int taken_error;  /* atomic: the socket's error that roceshim read */
	bool rx_shut;	  /* SHUT_RD on RDMA: the socket is shut on TCP */
	bool qp_lost;	  /* atomic: the CM says the queue pair is gone */
	bool late_watch;  /* atomic: shut both ways on RDMA, no bytes since */
	/* Atomic: what blocking calls ask of the kernel socket (conn.c). */
	uint64_t call_opts[CONN_OPT_COUNT];
	/* Atomic: the transport's arrivals when a call last asked the kernel
	 * socket whether the peer reset (conn_rdma.c). */
	uint64_t peer_checked_at;

	/* Under lock: */
	pthread_mutex_t lock;
	pthread_cond_t moved; /* path left CONN_MOVING */
	int kfd;	      /* the kernel socket for roceshim's own use */
	bool kfd_ours;	      /* kfd is a dup the program never saw */
	bool kfd_for_call;    /* kept only for a call still in it */
	bool kfd_for_peer;    /* kept until the peer took this end's bytes */
	struct conn *prev_kept, *next_kept; /* while kfd_ours (conn.c) */
	bool kwatched; /* kfd is in the progress thread's set */
	struct progress_watcher kwatch;
	bool released;	  /* the program closed its last fd */
	bool shut_kernel; /* a shutdown(SHUT_WR) waits for the kernel socket */
	/*
	 * kfd lingers 0 until the move's backlog is all in it: a process
	 * that ends first resets rather than end with part of the stream.
	 */
	bool reset_until_flushed;
	enum roceshim_downgrade cause;
	struct wire_positions pos; /* where the streams stood at the freeze */
	uint8_t marker[WIRE_MARKER_LEN]; /* the peer's, as it comes in */
	unsigned int marker_len;
	uint64_t backlog_from; /* staged bytes still to write to the socket */
	uint64_t backlog_to;
	struct move_wait wait;	   /* for the peer's marker */
	uint64_t catch_up_to;	   /* see conn_move_caught_up_locked() */
	int64_t catch_up_until_ms; /* gives up waiting for it then */
	struct conn *next_moving;
	struct conn *prev_live, *next_live; /* under the live list's lock */
	uint64_t silent_mark;	 /* the health check's: completions seen */
	int64_t silent_since_ms; /* since then, none; 0: not watched yet */
};

/*
 * conn_rdma.c: calls carried over RDMA; -EXDEV once the transport froze.
 * A blocking send may start the move itself (send_stall.h): it returns
 * what it sent before, and the caller sends the rest over TCP.
 */
ssize_t conn_rdma_send(struct conn *c, int tcp_fd, const struct iovec *iov,
		       int iovcnt, int flags);
ssize_t conn_rdma_recv(struct conn *c, int tcp_fd, const struct iovec *iov,
		       int iovcnt, int flags);
/* Lets the FIN's write complete, at most 200 ms. */
void conn_rdma_wait_writes(struct conn *c);
/* The kernel socket fd lingers 0: its close sends a reset, as TCP's does. */
void conn_reset_on_close(int fd);
/* The kernel socket fd lingers as by default: its close sends a FIN. */
void conn_deliver_on_close(int fd);
/*
 * The connection failed (CONN_FAILED): the program's next call, or
 * SO_ERROR, reports ECONNRESET once, unless an error is already recorded.
 */
void conn_record_reset(struct conn *c);

/*
 * conn_move.c: the move to the kernel socket.  The caller holds c->lock.
 * conn_move_begin() freezes the transport and writes this end's marker
 * (once; later calls do nothing); the rest comes with the peer's marker,
 * which the progress thread reads when the socket is readable
 * (conn_move_kernel_event()).
 */
void conn_move_begin_locked(struct conn *c, enum roceshim_downgrade cause);
void conn_move_kernel_event_locked(struct conn *c, uint32_t events);
/* Writes what it can of the backlog; true when none is left. */
bool conn_move_flush_locked(struct conn *c);
/*
 * The program shut its write side (over RDMA, its RDMA FIN is out).  True
 * if the kernel FIN may go now, which the caller sends; else it goes after
 * the bytes of a move that may still come or is not yet written out.
 */
bool conn_move_shut_write_locked(struct conn *c);
/*
 * The backlog cannot be written (why): the kernel socket is reset, for
 * the peer and for this end's program, and the backlog dropped.
 */
void conn_move_reset_locked(struct conn *c, const char *why);
/*
 * After a move: whether the kernel socket has received the first of what
 * the peer resends (what its ring held that this end's program had not
 * read), or has given up waiting for it.  Over TCP those bytes would be
 * in the socket already: a fork child's view, and a last close that
 * resets because of unread bytes, depend on them being there.
 */
bool conn_move_caught_up_locked(struct conn *c, int64_t now_ms);
bool conn_move_tick(void);
/* Puts kfd in the progress thread's set for events, once (oneshot). */
void conn_watch_kernel_locked(struct conn *c, uint32_t events);

#endif /* ROCESHIM_CONN_IMPL_H */
