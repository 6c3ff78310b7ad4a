// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for control calls: fcntl, ioctl, socket options and
 * names.  The kernel socket stays the real one, so these reach libc
 * unchanged; roceshim only watches for the results it must know about
 * (a duplicated fd, the outcome of a non-blocking connect, an option that
 * only kernel TCP has).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "conn.h"
#include "connector.h"
#include "real.h"
#include "shim.h"
#include "sockopt.h"
#include "track.h"
#include "upgraded.h"

int fcntl64(int fd, int cmd, ...);

/*
 * The program turned on signal-driven I/O (O_ASYNC, FIOASYNC): only the
 * kernel socket raises SIGIO, so an upgraded connection moves there.
 */
static int after_async_on(int fd, int ret)
{
	struct sock *sock;

	if (ret < 0)
		return ret;
	sock = shim_lookup(fd);
	if (sock) {
		track_option(sock, fd);
		sock_put(sock);
	}
	return ret;
}

/*
 * The program changes what a connection's blocking calls ask of the
 * kernel (conn.h): the file's status flags (F_SETFL, FIONBIO) or a socket
 * timeout.  call_opt_changing() before the kernel call, and the
 * connection it returns (with *sock referenced), or NULL; then
 * call_opt_changed() with the call's result.
 */
static struct conn *call_opt_changing(int fd, struct sock **sock)
{
	struct conn *c;
	int entry = errno;

	*sock = shim_lookup(fd);
	if (!*sock)
		return NULL;
	c = __atomic_load_n(&(*sock)->conn, __ATOMIC_ACQUIRE);
	if (!c) {
		sock_put(*sock);
		return NULL;
	}
	conn_call_opt_changing(c);
	errno = entry;
	return c;
}

static int call_opt_changed(struct conn *c, struct sock *sock,
			    enum conn_call_opt opt, int ret)
{
	if (!c)
		return ret;
	if (ret >= 0)
		conn_call_opt_set(c, opt);
	sock_put(sock);
	return ret;
}

static bool sets_async(int cmd, void *arg)
{
	return cmd == F_SETFL && ((uintptr_t)arg & O_ASYNC);
}

/* fcntl() or fcntl64() (real_fcntl) with what roceshim must know of it. */
static int fcntl_with(int (*real_fcntl)(int, int, ...), int fd, int cmd,
		      void *arg)
{
	struct sock *sock = NULL;
	struct conn *c = NULL;
	int ret;

	if (cmd == F_SETFL)
		c = call_opt_changing(fd, &sock);
	ret = real_fcntl(fd, cmd, arg);
	ret = call_opt_changed(c, sock, CONN_OPT_NONBLOCK, ret);
	if (sets_async(cmd, arg))
		ret = after_async_on(fd, ret);
	return track_fcntl_result(fd, cmd, ret);
}

/*
 * The third argument is an int or a pointer depending on cmd, or absent;
 * like glibc's own fcntl, read it as a pointer-sized value and pass it on.
 */
SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	shim_ensure_init();
	return fcntl_with(real.fcntl, fd, cmd, arg);
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	shim_ensure_init();
	return fcntl_with(real.fcntl64, fd, cmd, arg);
}

/* The system call itself, shaped as fcntl() for fcntl_with(). */
static int fcntl_by_syscall(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return (int)real.syscall(SYS_fcntl, (long)fd, (long)cmd, arg);
}

long shim_fcntl_syscall(const long *arg)
{
	return fcntl_with(fcntl_by_syscall, (int)arg[0], (int)arg[1],
			  (void *)arg[2]);
}

/*
 * The byte counts of an upgraded connection's queues are roceshim's, not
 * those of its idle kernel socket: the count, or a negative errno value
 * where the kernel socket has the answer.
 */
static int upgraded_queue_ioctl(int fd, unsigned long request)
{
	struct sock *sock = shim_lookup(fd);
	int n = -ENOTCONN;

	if (!sock)
		return n;
	if (sock->conn && !conn_is_plain(sock->conn))
		n = upgraded_queue_bytes(sock, fd, request);
	sock_put(sock);
	return n;
}

static bool counts_a_queue(unsigned long request)
{
	return request == FIONREAD || request == SIOCOUTQ ||
	       request == SIOCOUTQNSD;
}

SHIM_EXPORT int ioctl(int fd, unsigned long request, ...)
{
	int n, ret, entry = errno;
	struct sock *sock = NULL;
	struct conn *c = NULL;
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	shim_ensure_init();
	if (counts_a_queue(request) && arg) {
		n = upgraded_queue_ioctl(fd, request);
		errno = entry;
		if (n >= 0) {
			*(int *)arg = n;
			return 0;
		}
	}
	if (request == FIONBIO)
		c = call_opt_changing(fd, &sock);
	ret = real.ioctl(fd, request, arg);
	ret = call_opt_changed(c, sock, CONN_OPT_NONBLOCK, ret);
	/* The kernel read the int: the pointer is valid. */
	if (request == FIOASYNC && !ret && *(int *)arg)
		after_async_on(fd, ret);
	return ret;
}

/* SO_RCVTIMEO or SO_SNDTIMEO, either layout of the timeval: which, or -1. */
static int sets_timeout(int level, int name)
{
	if (level != SOL_SOCKET)
		return -1;
	switch (name) {
#ifdef SO_RCVTIMEO_NEW
	case SO_RCVTIMEO_OLD:
	case SO_RCVTIMEO_NEW:
		return CONN_OPT_RCVTIMEO;
	case SO_SNDTIMEO_OLD:
	case SO_SNDTIMEO_NEW:
		return CONN_OPT_SNDTIMEO;
#else
	case SO_RCVTIMEO:
		return CONN_OPT_RCVTIMEO;
	case SO_SNDTIMEO:
		return CONN_OPT_SNDTIMEO;
#endif
	default:
		return -1;
	}
}

static bool sets_sndbuf(int level, int name)
{
	return level == SOL_SOCKET &&
	       (name == SO_SNDBUF || name == SO_SNDBUFFORCE);
}

static bool sets_inq(int level, int name)
{
	return level == IPPROTO_TCP && name == TCP_INQ;
}

/* The options that change what roceshim does with a socket. */
static bool option_tracked(int level, int name)
{
	return sets_sndbuf(level, name) || sets_inq(level, name) ||
	       (level == IPPROTO_TCP && name == TCP_DEFER_ACCEPT) ||
	       sockopt_rx_timestamp(level, name) ||
	       sockopt_tcp_only(level, name);
}

/*
 * An upper layer protocol (TCP_ULP: kernel TLS) frames every byte of the
 * kernel socket from the option on: an upgraded connection moves there
 * first, and what moved with it is written there before, unframed.  One
 * that could not move refuses the option (-EOPNOTSUPP; OpenSSL then does
 * TLS itself), for its bytes would never reach the layer.
 */
static int before_upper_layer(int level, int name, int fd)
{
	struct sock *sock;
	int err = 0;

	if (level != IPPROTO_TCP || name != TCP_ULP)
		return 0;
	sock = shim_lookup(fd);
	if (!sock)
		return 0;
	if (upgraded_carried(sock)) {
		upgraded_hand_over(sock, ROCESHIM_DOWNGRADE_SOCKOPT);
		if (upgraded_carried(sock))
			err = -EOPNOTSUPP;
	}
	sock_put(sock);
	return err;
}

SHIM_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			   socklen_t len)
{
	int saved = errno, err, ret, on, opt;
	struct conn *c;
	struct sock *sock;

	shim_ensure_init();
	err = before_upper_layer(level, name, fd);
	if (err) {
		errno = -err;
		return -1;
	}
	errno = saved;
	opt = sets_timeout(level, name);
	if (opt >= 0 && (c = call_opt_changing(fd, &sock)))
		return call_opt_changed(
			c, sock, opt,
			real.setsockopt(fd, level, name, val, len));
	ret = real.setsockopt(fd, level, name, val, len);
	if (ret || !option_tracked(level, name))
		return ret;
	sock = shim_lookup(fd);
	if (!sock)
		return ret;
	if (sets_sndbuf(level, name)) {
		track_sndbuf(sock, fd);
	} else if (sets_inq(level, name)) {
		/* The kernel took an int, 0 or 1. */
		memcpy(&on, val, sizeof(on));
		__atomic_store_n(&sock->tcp_inq, on, __ATOMIC_RELAXED);
	} else if (sockopt_rx_timestamp(level, name)) {
		/* One form turns another off: the kernel says which is on. */
		__atomic_store_n(&sock->rx_timestamp,
				 sockopt_rx_timestamp_on(fd), __ATOMIC_RELAXED);
	} else {
		track_option(sock, fd);
	}
	sock_put(sock);
	return ret;
}

SHIM_EXPORT int getsockopt(int fd, int level, int name, void *val,
			   socklen_t *len)
{
	struct sock *sock;
	int ret, entry = errno;

	shim_ensure_init();
	ret = real.getsockopt(fd, level, name, val, len);
	if (ret || level != SOL_SOCKET || name != SO_ERROR ||
	    *len < sizeof(int))
		return ret;
	/* Gloo and the TCPStore learn a non-blocking connect's fate here. */
	sock = shim_lookup(fd);
	if (sock) {
		int so_error, early = connector_take_error(sock);

		if (early)
			memcpy(val, &early, sizeof(early));
		memcpy(&so_error, val, sizeof(so_error));
		if (!so_error) {
			so_error = upgraded_take_error(sock);
			memcpy(val, &so_error, sizeof(so_error));
		}
		if (!connector_pending(sock))
			track_connect_result(sock, fd, so_error);
		sock_put(sock);
	}
	errno = entry;
	return ret;
}

SHIM_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	shim_ensure_init();
	return real.getsockname(fd, addr, len);
}

SHIM_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	shim_ensure_init();
	return real.getpeername(fd, addr, len);
}
