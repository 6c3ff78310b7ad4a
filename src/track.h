/* SPDX-License-Identifier: MIT */
/*
 * What the socket-lifecycle wrappers tell roceshim: which fds are TCP
 * sockets, when they connect, listen, accept, are duplicated or closed,
 * and what data moved.  Each function runs after the real libc call and
 * takes its result; none changes errno or the result the caller returns.
 */
#ifndef ROCESHIM_TRACK_H
#define ROCESHIM_TRACK_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "sock.h"

/* socket() returned fd: track it if it is a TCP socket. */
void track_socket(int fd, int domain, int type, int protocol);

/* fd was created by a call that never makes a TCP socket. */
void track_other(int fd);

/*
 * fd (or every fd from first to last) is about to be closed: whatever
 * roceshim knew of it goes now, since its number may be reused as soon as
 * the kernel has closed it.
 */
void track_close(int fd);
void track_close_range(unsigned int first, unsigned int last);

/* new_fd is now a duplicate of old_fd (dup, dup2, dup3, F_DUPFD). */
void track_dup(int old_fd, int new_fd);
/*
 * For the wrappers of the dup family: the call returned new_fd (or -1);
 * returns it, with errno as it was.  An upgraded connection dup'd onto
 * fd 0, 1 or 2 moves to TCP first (ROCESHIM_DOWNGRADE_STDIO): libc's
 * stdin, stdout and stderr use those fds without a call roceshim sees.
 */
int track_dup_result(int old_fd, int new_fd);
/* The same for fcntl(fd, cmd): only F_DUPFD and F_DUPFD_CLOEXEC dup. */
int track_fcntl_result(int fd, int cmd, int ret);

/*
 * Before the real connect(): decides RDMA or TCP and puts the reason for
 * track_connect() in *reason.  A blocking connect runs the RDMA handshake
 * here; a non-blocking one starts it in the background (connector.h) and
 * returns -EINPROGRESS: the caller makes no TCP connect and reports that.
 * -EINTR: a signal handler interrupted the blocking handshake where the
 * kernel's connect would fail with EINTR; the caller starts the kernel's
 * connect without waiting for it (connector_kernel_connect()) and
 * reports EINTR, as the kernel's goes on after it (or the kernel's
 * result, if that connect ended at once).  Another negative
 * errno: the connect() fails with it, as the kernel's would (EALREADY
 * while one is in the background, or the error of one that failed).  0:
 * the real connect() goes on.
 */
int track_connect_prepare(struct sock *sock, int fd,
			  const struct sockaddr *addr, socklen_t len,
			  enum roceshim_reason *reason);
void track_connect(struct sock *sock, int fd, const struct sockaddr *addr,
		   socklen_t len, int ret, int err,
		   enum roceshim_reason reason);
/*
 * sendto() or sendmsg() with MSG_FASTOPEN to addr returned ret: a socket
 * it connected (or began to) is recorded as a connection that stays on
 * TCP, its first bytes having gone in the kernel's handshake.  errno is
 * left as it was.
 */
void track_fastopen(struct sock *sock, int fd, const struct sockaddr *addr,
		    socklen_t len, ssize_t ret);
/*
 * Before the real listen(): the RDMA CM listener opens first when the port
 * is already bound, so that no client finds the TCP port open and the RDMA
 * one not yet (it would fall back).  track_listen_failed() undoes it when
 * the real listen() fails; track_listen() follows a successful one.
 */
void track_listen_prepare(struct sock *sock, int fd, int backlog);
void track_listen_failed(struct sock *sock);
void track_listen(struct sock *sock, int fd, int backlog);
/*
 * accept() returned fd, a connection of listener.  peer: the peer's
 * address as accept() wrote it whole (peer_len bytes), or NULL to ask the
 * socket.
 */
void track_accept(struct sock *listener, int fd, const struct sockaddr *peer,
		  socklen_t peer_len);
/*
 * accept() returned a connection of listener fd, which this process did
 * not open: while connections an exec handed over wait (exec_handover.h),
 * or where the exec handed a share region over (share_import()), a TCP
 * listener is tracked from then on, and its sock returned with a
 * reference; NULL otherwise.
 */
struct sock *track_inherited_listener(int fd);
/*
 * At start, with a share region handed over: the TCP listeners the
 * program inherited are tracked at once, so that an exec of its own (a
 * wrapper script's) hands the region on with them.
 */
void track_inherited_listeners(void);

/*
 * A non-blocking connect ended: so_error from getsockopt(SO_ERROR) or from
 * a later connect(), 0 for connected.  fd names it in the log (-1: unknown).
 */
void track_connect_result(struct sock *sock, int fd, int so_error);

/*
 * The program set SO_SNDBUF on fd: an upgraded connection keeps what it
 * has sent and the peer has not read within the kernel's value, as the
 * kernel socket would.  An accepted connection has its listener's.
 */
void track_sndbuf(struct sock *sock, int fd);
/*
 * The program set TCP_DEFER_ACCEPT on fd, or an option only kernel TCP
 * has (sockopt.h): a listener with one takes no connection over RDMA
 * from now on (track.c says why), and an upgraded connection moves to
 * TCP (ROCESHIM_DOWNGRADE_SOCKOPT), as does a connect in the background
 * (given up, ROCESHIM_REASON_UNSUPPORTED, or moved once made) and one
 * accepted after its listener got such an option, which it inherits.
 * Set before connect() or listen(), such an option keeps the socket on
 * TCP (ROCESHIM_REASON_UNSUPPORTED).  errno is left as it was.
 */
void track_option(struct sock *sock, int fd);

/*
 * Result of a data call on a tracked socket: bytes, or -1 and err (the
 * call's errno).  errno is left as it was.
 */
void track_tx(struct sock *sock, ssize_t ret, int err);
void track_rx(struct sock *sock, ssize_t ret, int err);

/*
 * Whole-process events, before they happen: the upgraded connections
 * that another process could go on using, or that this one is about to
 * stop serving, move to their kernel TCP socket first (conn.h).
 * track_exec(): the image is replaced; connections whose fd survives
 * (no FD_CLOEXEC), and those a fork child may share.  track_spawn(): a
 * posix_spawn child inherits the same, and the fds its file actions dup
 * (track_spawn_dup()).  track_daemon(): daemon() leaves its parent
 * behind: every connection.  track_fds_passed(): the upgraded sockets
 * among the SCM_RIGHTS of msg.  track_exit(): at exit, shared
 * connections move, and the others end as a close would end them.
 * track_exec(), track_daemon() and track_exit() then wait for the closed
 * connections to finish (conn_closing_drain()).
 * track_fork_prepare(): the connects in the background settle first
 * (connector_share()), those whose fd survives an exec only if the child
 * is to exec at once (for_exec); a process with none pays one load.
 * track_fork_child(): the child lets go of the parent's copies for them,
 * unless it shares the parent's descriptor table (fds_shared: a clone
 * with CLONE_FILES), where they are the parent's own.
 */
void track_fork_prepare(bool for_exec);
void track_fork_child(bool fds_shared);
/*
 * track_exec() also stops the CM listeners of the listeners the new image
 * keeps, and hands it the connections they took that accept() has not
 * (exec_handover.h): it returns the environment to exec with, envp itself
 * or a new one that track_exec_failed() frees if the exec fails.
 */
char **track_exec(char *const envp[]);
void track_exec_failed(char *const envp[], char **env);
/*
 * A kept listener whose CM listener stays with another process (this
 * one, for a spawn; the owner, in a fork child) gives the new image the
 * share region that lists what that CM listener took (share.h): the
 * environment to exec or spawn with, as above.  track_spawn_done() frees
 * it once posix_spawn has returned.  track_spawn() is the same for
 * system() and popen(), whose environment is the process's own: there
 * the listener's new program cannot be told.
 */
void track_spawn(void);
char **track_spawn_env(char *const envp[]);
void track_spawn_done(char *const envp[], char **env);
void track_spawn_dup(int fd);
void track_daemon(void);
/*
 * Whether a real vfork is safe: no socket of the process has RDMA state
 * (a connection, a connect in the background, a CM listener) that the
 * child could hand to the program it execs.
 */
bool track_vfork_safe(void);
void track_fds_passed(const struct msghdr *msg);
void track_exit(void);
/*
 * At _exit(), which runs no exit handler and may be called from a signal
 * handler: each connection this process owns on RDMA ends as at exit()
 * (conn_quick_exit()), each within a bounded time.
 */
void track_quick_exit(void);
/*
 * The process is about to change its credentials (setuid() and the
 * like).  The kernel refuses every later write to an RDMA descriptor
 * opened before ("changed security contexts after opening file
 * descriptor"), on every thread: the CM's events, and on some devices
 * each send.  So a process that serves RDMA handshakes (not a fork child
 * of one) gives up RDMA first (policy_stop_rdma()): its connections and
 * connects move to TCP, its listeners' CM listeners go (clients are refused at
 * once and stay on TCP; connections they took still wait for accept(), which
 * moves them), and its later connections stay on TCP.  Leaves errno.
 */
void track_credentials_change(void);
/*
 * The process is about to set up io_uring (io_uring_setup(2), directly or
 * through liburing).  Its reads and writes of a socket go to the kernel
 * without a call roceshim sees, so they must find the connection on its
 * kernel socket: the process gives up RDMA for good (policy_stop_rdma()),
 * its connections, those it inherited included, move to TCP, and its
 * later ones stay there.  Leaves errno.
 */
void track_io_uring(void);

#endif /* ROCESHIM_TRACK_H */
