// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the socket lifecycle: creation, connection,
 * duplication and close.  Each calls libc, then tells the tracker, and
 * returns libc's result with libc's errno.
 */
#include <errno.h>
#include <limits.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

#include "conn.h"
#include "connector.h"
#include "log.h"
#include "readiness.h"
#include "real.h"
#include "shim.h"
#include "track.h"
#include "upgraded.h"

SHIM_EXPORT int socket(int domain, int type, int protocol)
{
	int fd, err;

	shim_ensure_init();
	fd = real.socket(domain, type, protocol);
	if (fd < 0 || !shim_tracking())
		return fd;
	err = errno;
	track_socket(fd, domain, type, protocol);
	errno = err;
	return fd;
}

SHIM_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	int ret, err;

	shim_ensure_init();
	ret = real.socketpair(domain, type, protocol, sv);
	if (ret || !shim_tracking())
		return ret;
	err = errno;
	track_other(sv[0]);
	track_other(sv[1]);
	errno = err;
	return ret;
}

SHIM_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	shim_ensure_init();
	return real.bind(fd, addr, len);
}

SHIM_EXPORT int listen(int fd, int backlog)
{
	int ret, err, entry = errno;
	struct sock *sock;

	shim_ensure_init();
	sock = shim_lookup(fd);
	if (sock)
		track_listen_prepare(sock, fd, backlog);
	/* A listen that succeeds leaves errno as the program had it. */
	errno = entry;
	ret = real.listen(fd, backlog);
	if (!sock)
		return ret;
	err = errno;
	if (ret)
		track_listen_failed(sock);
	else
		track_listen(sock, fd, backlog);
	sock_put(sock);
	errno = err;
	return ret;
}

/*
 * given: the size of the program's address buffer before the call.  The
 * peer's address that accept() wrote there, whole, spares a getpeername().
 */
static int after_accept(int listen_fd, int fd, const struct sockaddr *addr,
			socklen_t given, const socklen_t *len)
{
	struct sock *listener;
	int err;

	if (fd < 0 || !shim_tracking())
		return fd;
	err = errno;
	listener = shim_lookup(listen_fd);
	if (!listener)
		listener = track_inherited_listener(listen_fd);
	if (listener) {
		if (addr && len && *len <= given)
			track_accept(listener, fd, addr, *len);
		else
			track_accept(listener, fd, NULL, 0);
		sock_put(listener);
	} else {
		track_other(fd);
	}
	errno = err;
	return fd;
}

SHIM_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	socklen_t given = addr && len ? *len : 0;

	shim_ensure_init();
	return after_accept(fd, real.accept(fd, addr, len), addr, given, len);
}

SHIM_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len,
			int flags)
{
	socklen_t given = addr && len ? *len : 0;

	shim_ensure_init();
	return after_accept(fd, real.accept4(fd, addr, len, flags), addr, given,
			    len);
}

SHIM_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	enum roceshim_reason reason = ROCESHIM_REASON_NONE;
	int ret, err, entry = errno;
	struct sock *sock;

	shim_ensure_init();
	sock = shim_lookup(fd);
	if (!sock)
		return real.connect(fd, addr, len);
	/*
	 * connect(AF_UNSPEC) dissolves a connection, and the kernel resets
	 * it: an upgraded one moves to its kernel socket first, which then
	 * carries whatever the socket connects to next.
	 */
	if (addr && len >= sizeof(addr->sa_family) &&
	    addr->sa_family == AF_UNSPEC && upgraded_carried(sock))
		upgraded_make_plain(sock, ROCESHIM_DOWNGRADE_DISCONNECT);
	/* RDMA or TCP is settled before the first TCP byte. */
	err = -track_connect_prepare(sock, fd, addr, len, &reason);
	if (err == EINTR && reason == ROCESHIM_REASON_ABANDONED) {
		ret = connector_kernel_connect(fd, addr, len);
		err = ret ? errno : 0;
		track_connect(sock, fd, addr, len, ret, err, reason);
		sock_put(sock);
		/* Interrupted, unless the kernel's connect ended at once. */
		if (!ret) {
			errno = entry;
			return 0;
		}
		errno = err == EINPROGRESS ? EINTR : err;
		return -1;
	}
	if (err && err != EINPROGRESS) {
		sock_put(sock);
		errno = err;
		return -1;
	}
	if (err) {
		ret = -1;
	} else {
		ret = real.connect(fd, addr, len);
		err = ret ? errno : 0;
		/* The handshake took the time in which most signals come. */
		if (ret && err == EINTR &&
		    __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE) &&
		    connector_settle_interrupted(fd))
			ret = err = 0;
	}
	track_connect(sock, fd, addr, len, ret, err, reason);
	sock_put(sock);
	/* A connect that succeeds leaves errno as the program had it. */
	errno = err ? err : entry;
	return ret;
}

SHIM_EXPORT int shutdown(int fd, int how)
{
	int ret, err, entry = errno;
	struct sock *sock;
	bool valid_how;

	shim_ensure_init();
	sock = shim_lookup(fd);
	if (!sock)
		return real.shutdown(fd, how);
	valid_how = how == SHUT_RD || how == SHUT_WR || how == SHUT_RDWR;
	if (valid_how && connector_pending(sock) &&
	    connector_abort(sock, how)) {
		sock_put(sock);
		errno = entry;
		return 0;
	}
	if (valid_how && sock->conn && !conn_is_plain(sock->conn)) {
		ret = upgraded_shutdown(sock, fd, how);
		sock_put(sock);
		if (ret) {
			errno = -ret;
			return -1;
		}
		errno = entry;
		return 0;
	}
	ret = real.shutdown(fd, how);
	/* The failure's errno, or the program's. */
	err = ret ? errno : entry;
	sock_put(sock);
	errno = err;
	return ret;
}

/* Before the close: once closed, a number may be reused at once. */
static void forget(int fd)
{
	if (shim_tracking())
		track_close(fd);
}

static void forget_range(unsigned int first, unsigned int last, int flags)
{
	if (shim_tracking() && first <= last && !(flags & CLOSE_RANGE_CLOEXEC))
		track_close_range(first, last);
}

/*
 * roceshim's log file is not the program's, nor is a vfork child's gate
 * (shim_vfork_gate_fd()): a close of either number fails as it would
 * where roceshim opened nothing there, and a close of a range closes the
 * numbers around them.  Otherwise the next file the program opened there
 * would receive the log's lines, and the child's parent would go on
 * before the child's exec.
 */
static bool is_log_file(long fd)
{
	int log_fd = log_file_fd();

	return log_fd >= 0 && fd == log_fd;
}

static bool is_own_fd(long fd)
{
	int gate = shim_vfork_gate_fd();

	return is_log_file(fd) || (gate >= 0 && fd == gate);
}

/* roceshim's own descriptors, ascending, in own; how many. */
static int own_fds(unsigned int own[2])
{
	int log_fd = log_file_fd(), gate = shim_vfork_gate_fd(), n = 0;

	if (log_fd >= 0)
		own[n++] = (unsigned int)log_fd;
	if (gate >= 0 && gate != log_fd)
		own[n++] = (unsigned int)gate;
	if (n == 2 && own[0] > own[1]) {
		own[0] = (unsigned int)gate;
		own[1] = (unsigned int)log_fd;
	}
	return n;
}

static long close_range_around_own(unsigned int first, unsigned int last,
				   int flags)
{
	unsigned int own[2];
	int i, n = flags & CLOSE_RANGE_CLOEXEC ? 0 : own_fds(own);
	long ret = 0;

	for (i = 0; i < n && !ret; i++) {
		if (own[i] < first || own[i] > last)
			continue;
		if (own[i] > first)
			ret = real.syscall(SYS_close_range, first, own[i] - 1,
					   flags);
		if (own[i] == last)
			return ret;
		first = own[i] + 1;
	}
	if (!ret)
		ret = real.syscall(SYS_close_range, first, last, flags);
	return ret;
}

/* A dup2() onto the log file's number: the log moves first. */
static void before_dup_onto(long new_fd)
{
	if (is_log_file(new_fd))
		log_file_move();
}

SHIM_EXPORT int close(int fd)
{
	int entry = errno;

	shim_ensure_init();
	if (is_own_fd(fd)) {
		errno = EBADF;
		return -1;
	}
	forget(fd);
	errno = entry;
	return real.close(fd);
}

SHIM_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	shim_ensure_init();
	if (!real.close_range) {
		errno = ENOSYS;
		return -1;
	}
	forget_range(first, last, flags);
	return (int)close_range_around_own(first, last, flags);
}

SHIM_EXPORT void closefrom(int lowfd)
{
	bool over_log;

	shim_ensure_init();
	if (shim_tracking() && lowfd >= 0)
		track_close_range(lowfd, UINT_MAX);
	over_log = lowfd >= 0 && log_file_fd() >= lowfd;
	if (lowfd >= 0 && (over_log || shim_vfork_gate_fd() >= lowfd) &&
	    !close_range_around_own(lowfd, UINT_MAX, 0))
		return;
	if (real.closefrom)
		real.closefrom(lowfd);
	/* Closed with the rest (no close_range): open it again. */
	if (over_log)
		log_open(shim_config.log_level, shim_config.log_file);
}

SHIM_EXPORT int dup(int fd)
{
	shim_ensure_init();
	return track_dup_result(fd, real.dup(fd));
}

SHIM_EXPORT int dup2(int old_fd, int new_fd)
{
	shim_ensure_init();
	before_dup_onto(new_fd);
	return track_dup_result(old_fd, real.dup2(old_fd, new_fd));
}

SHIM_EXPORT int dup3(int old_fd, int new_fd, int flags)
{
	shim_ensure_init();
	before_dup_onto(new_fd);
	return track_dup_result(old_fd, real.dup3(old_fd, new_fd, flags));
}

/*
 * libuv closes every fd with syscall(SYS_close, fd), to stay clear of
 * close()'s cancellation point: such a close must still reach the fd
 * table, or the socket's connection would outlive it and its number's
 * next owner would find it.  The system call itself stays a system call
 * (no cancellation point; close_range where libc has no wrapper).
 */
bool shim_fd_syscall(long number, const long *arg, long *ret)
{
	switch (number) {
	case SYS_close:
		if (is_own_fd(arg[0])) {
			errno = EBADF;
			*ret = -1;
			return true;
		}
		forget((int)arg[0]);
		*ret = real.syscall(SYS_close, arg[0]);
		return true;
	case SYS_close_range:
		forget_range((unsigned int)arg[0], (unsigned int)arg[1],
			     (int)arg[2]);
		*ret = close_range_around_own((unsigned int)arg[0],
					      (unsigned int)arg[1],
					      (int)arg[2]);
		return true;
	case SYS_dup:
#ifdef SYS_dup2
	case SYS_dup2:
#endif
	case SYS_dup3:
		if (number != SYS_dup)
			before_dup_onto(arg[1]);
		*ret = track_dup_result(
			(int)arg[0],
			(int)real.syscall(number, arg[0], arg[1], arg[2]));
		return true;
	case SYS_fcntl:
		*ret = shim_fcntl_syscall(arg);
		return true;
	default:
		return false;
	}
}

SHIM_EXPORT int epoll_create(int size)
{
	int fd;

	shim_ensure_init();
	fd = real.epoll_create(size);
	if (fd >= 0 && shim_tracking()) {
		track_other(fd);
		readiness_set_opened(fd);
	}
	return fd;
}

SHIM_EXPORT int epoll_create1(int flags)
{
	int fd;

	shim_ensure_init();
	fd = real.epoll_create1(flags);
	if (fd >= 0 && shim_tracking()) {
		track_other(fd);
		readiness_set_opened(fd);
	}
	return fd;
}
