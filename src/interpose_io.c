// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the data calls.  On an untracked fd each costs one
 * table lookup on top of libc; on a tracked socket, the byte counts.
 */
#include <errno.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "real.h"
#include "shim.h"
#include "track.h"

/* The _FORTIFY_SOURCE entry points; glibc declares them only when fortified. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen);
void __chk_fail(void) __attribute__((noreturn));
ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count);

static ssize_t done_tx(struct sock *sock, ssize_t ret)
{
	int err = errno;

	track_tx(sock, ret, err);
	sock_put(sock);
	errno = err;
	return ret;
}

static ssize_t done_rx(struct sock *sock, ssize_t ret)
{
	int err = errno;

	track_rx(sock, ret, err);
	sock_put(sock);
	errno = err;
	return ret;
}

/* Wraps one libc data call: look up, call, account. */
#define DATA_CALL(done, fd, call)                    \
	do {                                         \
		struct sock *sock;                   \
		ssize_t ret;                         \
                                                     \
		shim_ensure_init();                  \
		sock = shim_lookup(fd);              \
		ret = call;                          \
		return sock ? done(sock, ret) : ret; \
	} while (0)

static ssize_t shim_read(int fd, void *buf, size_t count)
{
	DATA_CALL(done_rx, fd, real.read(fd, buf, count));
}

static ssize_t shim_recv(int fd, void *buf, size_t len, int flags)
{
	DATA_CALL(done_rx, fd, real.recv(fd, buf, len, flags));
}

static ssize_t shim_recvfrom(int fd, void *buf, size_t len, int flags,
			     struct sockaddr *from, socklen_t *fromlen)
{
	DATA_CALL(done_rx, fd,
		  real.recvfrom(fd, buf, len, flags, from, fromlen));
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	return shim_read(fd, buf, count);
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	DATA_CALL(done_tx, fd, real.write(fd, buf, count));
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	DATA_CALL(done_rx, fd, real.readv(fd, iov, iovcnt));
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	DATA_CALL(done_tx, fd, real.writev(fd, iov, iovcnt));
}

SHIM_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return shim_recv(fd, buf, len, flags);
}

SHIM_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	DATA_CALL(done_tx, fd, real.send(fd, buf, len, flags));
}

SHIM_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			     struct sockaddr *from, socklen_t *fromlen)
{
	return shim_recvfrom(fd, buf, len, flags, from, fromlen);
}

SHIM_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	DATA_CALL(done_tx, fd, real.sendto(fd, buf, len, flags, to, tolen));
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	DATA_CALL(done_rx, fd, real.recvmsg(fd, msg, flags));
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	DATA_CALL(done_tx, fd, real.sendmsg(fd, msg, flags));
}

static ssize_t mmsg_bytes(const struct mmsghdr *vec, int count)
{
	ssize_t bytes = 0;
	int i;

	for (i = 0; i < count; i++)
		bytes += vec[i].msg_len;
	return bytes;
}

/* The *mmsg calls return messages, the stats count bytes. */
static int done_mmsg(struct sock *sock, int ret, const struct mmsghdr *vec,
		     bool tx)
{
	int err = errno;
	ssize_t bytes = ret > 0 ? mmsg_bytes(vec, ret) : ret;

	if (tx)
		track_tx(sock, bytes, err);
	else
		track_rx(sock, bytes, err);
	sock_put(sock);
	errno = err;
	return ret;
}

SHIM_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			 int flags, struct timespec *timeout)
{
	struct sock *sock;
	int ret;

	shim_ensure_init();
	sock = shim_lookup(fd);
	ret = real.recvmmsg(fd, vec, vlen, flags, timeout);
	return sock ? done_mmsg(sock, ret, vec, false) : ret;
}

SHIM_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			 int flags)
{
	struct sock *sock;
	int ret;

	shim_ensure_init();
	sock = shim_lookup(fd);
	ret = real.sendmmsg(fd, vec, vlen, flags);
	return sock ? done_mmsg(sock, ret, vec, true) : ret;
}

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	DATA_CALL(done_tx, out_fd, real.sendfile(out_fd, in_fd, offset, count));
}

/* off_t is 64-bit on every ABI this builds for: one call serves both. */
SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset,
			       size_t count)
{
	return sendfile(out_fd, in_fd, offset, count);
}

SHIM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen)
{
	if (nbytes > buflen)
		__chk_fail();
	return shim_read(fd, buf, nbytes);
}

SHIM_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			       int flags)
{
	if (len > buflen)
		__chk_fail();
	return shim_recv(fd, buf, len, flags);
}

SHIM_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
				   int flags, struct sockaddr *from,
				   socklen_t *fromlen)
{
	if (len > buflen)
		__chk_fail();
	return shim_recvfrom(fd, buf, len, flags, from, fromlen);
}
