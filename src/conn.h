/* SPDX-License-Identifier: MIT */
/*
 * An upgraded connection: the transport of one TCP connection, its
 * readiness (readiness.h), and the TCP-like calls on it.
 *
 * Its bytes go over RDMA until it moves to its kernel TCP socket, at any
 * moment and in the middle of its streams (conn_move.c): when a fork
 * child uses it, when it survives an exec or leaves the process, when its
 * queue pair fails, or when the peer moves it.  Nothing is lost,
 * duplicated or reordered by a move, and afterwards the kernel socket is
 * an ordinary one (conn_is_plain()).
 *
 * The kernel socket beside the queue pair carries nothing until then.
 * roceshim watches it: the peer's close (its FIN) sends this end's later
 * writes there, where they fail as TCP's do, and its reset ends the reads
 * once the ring is empty (ECONNRESET).  EOF is the peer's RDMA FIN, after
 * its last byte.  A shutdown(SHUT_WR) sends the RDMA FIN; the kernel's
 * waits while the connection may still move.
 *
 * Contract: every function is thread safe.  A connection belongs to the
 * process that made it (its owner); in a fork child, the first call on an
 * inherited connection asks the owner to move it (share.h), and it is
 * plain from then on, in both.
 */
#ifndef ROCESHIM_CONN_H
#define ROCESHIM_CONN_H

#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <roceshim/stats.h>

#include "readiness.h"
#include "transport.h"

struct conn;

struct conn_options {
	unsigned int spin_us; /* how long a blocking call polls (spin.h) */
	size_t zerocopy_min;  /* the smallest zero-copy send (0: none) */
	/*
	 * The smallest send from CUDA-pinned memory that goes without a
	 * copy, blocking or not (0: only blocking ones of zerocopy_min),
	 * and the registration cache's cap (0: from RLIMIT_MEMLOCK).
	 */
	size_t pinned_zerocopy_min;
	size_t reg_cache_bytes;
	int move_timeout_ms;	/* the longest a move to TCP may take */
	uint16_t accepted_port; /* the listener's, or 0: this end dialled */
};

/* Takes ownership of id and t. */
int conn_create(struct rdma_cm_id *id, struct transport *t,
		const struct conn_options *opt, struct conn **out);
bool conn_alive(const struct conn *c);
/* The peer closed or reset it: its sends go to the kernel socket. */
bool conn_peer_gone(const struct conn *c);
struct readiness *conn_readiness(struct conn *c);

/* The handshake completed: the connection may be watched from now on. */
void conn_start(struct conn *c);

/*
 * The connection is the program's socket fd now, with stats row row and
 * the program's SO_SNDBUF (sndbuf, 0 when it set none: conn_limit_send()):
 * roceshim watches that kernel socket.  conn_fd_closing(): the program
 * closes fd; other_fd (or -1) still names the socket; in_call: a call of
 * the program's on another thread is still inside the socket, which the
 * kernel keeps open for it (and FIN waits) until that call returns.
 */
void conn_attach(struct conn *c, int fd, int row, int sndbuf);
void conn_fd_closing(struct conn *c, int fd, int other_fd, bool in_call);

/*
 * Socket-like calls with send/recv flags: bytes, or a negative errno;
 * *kernel says whether the kernel socket carried them.  They block as
 * the kernel socket tcp_fd says (O_NONBLOCK, MSG_DONTWAIT,
 * SO_SNDTIMEO/SO_RCVTIMEO: -EAGAIN when it runs out); a call that would
 * block polls the queue pair before it sleeps, for as long as spin.h
 * says.  A send that may block, of a buffer of at least zerocopy_min
 * bytes, writes from that buffer, registered for the call, and returns
 * only once those writes have completed; from CUDA-pinned memory, out
 * of a registration kept for the next send (reg_cache.h).  So does a
 * send of pinned memory of at least pinned_zerocopy_min bytes that must
 * not block: it waits for credit for at most 2 ms in all.  A buffer in
 * GPU memory gets -EFAULT where TCP's copy would fail, untouched.
 */
ssize_t conn_send(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags, bool *kernel);
ssize_t conn_recv(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags, bool *kernel);
/*
 * What a blocking call asks of the kernel socket fd, asked only until it
 * is known: whether the call must not block (MSG_DONTWAIT in msg_flags,
 * or O_NONBLOCK on the open file), and its timeout (SO_RCVTIMEO or
 * SO_SNDTIMEO, ms; -1 for none).  The program changes one through one of
 * its fds (F_SETFL, FIONBIO, setsockopt): conn_call_opt_changing()
 * before the kernel takes the change, conn_call_opt_set() after, and it
 * is asked again.  A fork child that inherited the connection has it
 * moved to TCP before its change: the owner could not see the change,
 * made to the open file or socket they share.
 */
enum conn_call_opt {
	CONN_OPT_NONBLOCK,
	CONN_OPT_RCVTIMEO,
	CONN_OPT_SNDTIMEO,
	CONN_OPT_COUNT
};
bool conn_call_nonblocking(struct conn *c, int fd, int msg_flags);
int64_t conn_call_timeout_ms(struct conn *c, int fd, int name);
void conn_call_opt_changing(struct conn *c);
void conn_call_opt_set(struct conn *c, enum conn_call_opt opt);

/* shutdown(), how as there; 0 or a negative errno. */
int conn_shutdown(struct conn *c, int fd, int how);
/* FIONREAD. */
int conn_readable_bytes(struct conn *c, int fd);
/*
 * SIOCOUTQ (unsent_only: SIOCOUTQNSD): on RDMA, transport_unacked()'s;
 * while a move to TCP owes the kernel socket bytes, those and the
 * socket's own; -ENOTCONN where the kernel socket alone has the answer.
 */
int conn_unacked_bytes(struct conn *c, int fd, bool unsent_only);
/*
 * TCP_INQ's count, as the kernel's tcp_inq_hint() has it: the bytes to
 * read, one more once the peer's FIN came (the FIN takes a sequence
 * number), and at least 1 once nothing more can come, so that the reader
 * reads its end.  c may be NULL (a connect that ended on TCP): the
 * kernel socket's.  0 while the connection moves.  errno may change.
 */
int conn_inq_hint(struct conn *c, int fd);
/*
 * The error of the kernel socket that roceshim read in the program's
 * stead (a reset met while reading the peer's marker), once; 0 if none.
 * SO_ERROR and the next read report it, as the kernel would have.
 */
int conn_take_error(struct conn *c);
/* SO_SNDBUF: the kernel's value for the socket (transport.h). */
void conn_limit_send(struct conn *c, int bytes);

/* Its bytes go over RDMA, or are about to go over TCP (the move). */
bool conn_on_rdma(const struct conn *c);
/* It moves, or moved, to TCP. */
bool conn_moving_or_moved(const struct conn *c);
/* The kernel socket carries it, and nothing of roceshim's is pending. */
bool conn_is_plain(struct conn *c);
/*
 * Moves it to the kernel socket now, for cause, and waits until it has
 * moved: 0, or -ECONNRESET if it could not (the peer is gone, or did not
 * answer in time: the connection is then reset).
 */
int conn_make_plain(struct conn *c, enum roceshim_downgrade cause);
/*
 * conn_make_plain(), then waits until the bytes that moved with it are
 * written to the kernel socket (they are this process's alone): before
 * the process goes, or another takes the socket.  A peer that takes none
 * of them for the move's timeout gets a reset, as does the socket.
 */
int conn_hand_over(struct conn *c, enum roceshim_downgrade cause);
/*
 * conn_hand_over() as the process leaves (exec, exit): a fork child's
 * claim of it publishes no stats segment, which would outlive the process.
 */
int conn_leave(struct conn *c, enum roceshim_downgrade cause);
/*
 * Starts that move without waiting for it: the program's calls wait for
 * it, or find it under way, as when the peer starts one.  For a
 * connection whose peer may not have accepted it yet, whose marker can
 * come only then.
 */
void conn_move_start(struct conn *c, enum roceshim_downgrade cause);

/*
 * Before a call of the program's that goes to the moved connection's
 * kernel socket itself (splice): the error roceshim read from the socket
 * is reported first, and the bytes that moved with the connection go out
 * before the program's, as conn_send() does.  0, or a negative errno for
 * the call (-EAGAIN if fd is non-blocking and the backlog waits).
 */
int conn_kernel_ready(struct conn *c, int fd);

/*
 * The CM says its queue pair is gone (the peer's disconnect, a device
 * removal), or this end let it go: it moves to TCP, unless the peer
 * closed it; one not attached yet moves once it is.  The first cause
 * given is the one recorded.
 */
void conn_qp_lost(struct conn *c, enum roceshim_downgrade cause);
/* This end lets the queue pair go (it disconnects it), for cause. */
void conn_drop_qp(struct conn *c, enum roceshim_downgrade cause);

/*
 * The program closed the last fd: send FIN (unless abortive), and let the
 * progress thread destroy the connection once the FIN is out (at most
 * 2 s), or, where a fork child may still use the socket, once it moved to
 * TCP.  conn_reap_tick() is that thread's tick hook.  Returns, when a
 * fork child goes on with it, conn_handed_over_port(); else 0.
 */
uint16_t conn_release(struct conn *c, bool abortive);
bool conn_reap_tick(void);
/*
 * Before the process leaves (exit, exec, daemon()): waits until the closed
 * connections are done, as the kernel finishes a closed socket's work
 * after its process has gone: at most as long as a close lingers, and
 * beyond that while one moves to TCP or its backlog is still written (a
 * peer that takes none of it for the move's timeout gets a reset).
 */
void conn_closing_drain(void);

/*
 * For a connection that never reached the program (a handshake that
 * failed after conn_create(), or one accept() never claimed): closes it
 * abortively, disconnects its queue pair and frees it, at once.
 */
void conn_discard(struct conn *c);

/*
 * A fork since it was made, whose child may hold it too: not a vfork
 * carried out as fork whose child has exec'd (conn_exec_fork_done()).
 */
bool conn_shared(const struct conn *c);

/* This process has forked: its sockets may be shared. */
bool conn_forked(void);
/*
 * The process exits with it open on fd: a shared one moves to TCP, and
 * one that moved writes what moved with it (conn_hand_over()); so does
 * one with bytes in its send queue; any other ends as the kernel's close
 * of it would (FIN, or a reset with unread bytes).
 */
void conn_exit(struct conn *c, int fd);
/*
 * The process ends without exit() (_exit(), perhaps from a signal
 * handler): one on RDMA ends as conn_exit() would end it, within a
 * bounded time, whatever locks this thread was holding.  A shared one
 * (a daemon's parent that _exit()s once it has forked) is given up at
 * hand_over_by (of clock_ms(), from conn_quick_exit_deadline(), one for
 * all of the process's connections): then the kernel's close is left to
 * end it, and a fork child that goes on with it finds it reset.  So is
 * one with bytes in its send queue.  Any other is left to the kernel's
 * close.
 */
int64_t conn_quick_exit_deadline(void);
void conn_quick_exit(struct conn *c, int fd, int64_t hand_over_by);
/*
 * Then the closed connections: those with bytes in their send queue move
 * them to their kernel sockets now, whose buffers deliver them after the
 * process, as TCP's would.  Waits until they are written there, or by
 * (of clock_ms()), without a lock.
 */
void conn_closing_quick_exit(int64_t by);

/* Its slot in memory shared with fork children (share.h). */
struct share_slot *conn_slot(struct conn *c);
/* A fork child asks the owner to move c to TCP. */
void conn_on_share_request(struct conn *c);
/*
 * The listener's port of c, which this process accepted and never wrote
 * to: a process that takes such a connection over (a child forked for
 * it, or a worker it was sent to) is the server's handler of every
 * connection.  0 for any other connection.
 */
uint16_t conn_handed_over_port(struct conn *c);
/*
 * accept() returned the socket fd of a connection that another process
 * accepted on the RDMA CM: a fork child's owner (share_pending_claim()),
 * or this process before an exec (exec_handover.h), the cause.  Nothing
 * has crossed it yet, and it moves to TCP from its first byte.  0, or a
 * negative errno (then the stream is unusable).
 */
int conn_move_unclaimed(int fd, enum roceshim_downgrade cause, int timeout_ms);
/*
 * A move of fd's connection failed: its TCP connection is reset, as a
 * broken one.  The peer gets a reset at once (a TCP disconnect), never an
 * end of stream it could take for a clean close; if another thread's
 * wait holds the disconnect off, nothing more is sent until the reset
 * that fd's close then sends.
 */
void conn_reset_kernel(int fd);

/*
 * Before every fork, a vfork carried out as one included (its parent runs
 * on, and may close what the child is about to exec with): connections
 * made before may be shared.
 */
void conn_fork_prepare(void);
/*
 * The vfork carried out as fork that this thread made last has come
 * back: its child exec'd or exited, and what it kept moved to TCP at its
 * exec, so it holds none of the connections.  Unless another fork came
 * since, they are as unshared as before it.
 */
void conn_exec_fork_done(void);
/*
 * The last of the fork's prepare handlers, after fd_room_fork_prepare():
 * the sockets roceshim keeps for closed connections stay as they are until
 * conn_fork_parent() or conn_fork_child().
 */
void conn_fork_lock(void);
void conn_fork_parent(void);
/*
 * fds_shared: the child shares the parent's descriptor table (CLONE_FILES),
 * and must close none of its descriptors.
 */
void conn_fork_child(bool fds_shared);

#endif /* ROCESHIM_CONN_H */
