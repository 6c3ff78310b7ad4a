// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the data calls.  On an untracked fd each costs one
 * table lookup on top of libc; on a tracked socket, the byte counts; on an
 * upgraded socket, the call goes to its RDMA connection instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "connector.h"
#include "cuda_mem.h"
#include "fd_room.h"
#include "real.h"
#include "shim.h"
#include "track.h"
#include "upgraded.h"
#include "wait_time.h"

/* The _FORTIFY_SOURCE entry points; glibc declares them only when fortified. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen);
void __chk_fail(void) __attribute__((noreturn));
ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count);

/* The bytes a kernel-socket call moved, by memory class (cuda_mem.h). */
static void __attribute__((noinline, cold))
count_classes(bool tx, const struct iovec *iov, int iovcnt, ssize_t ret)
{
	int err = errno;

	cuda_mem_call_begin();
	cuda_mem_count(tx, iov, iovcnt, (size_t)ret);
	errno = err;
}

static void __attribute__((noinline, cold))
count_classes_buf(bool tx, const void *buf, size_t len, ssize_t ret)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	count_classes(tx, &iov, 1, ret);
}

/*
 * A call on the kernel socket, done: its stats, then the reference goes.
 * errno stays as the call left it, which neither the tracking nor the
 * release of a sock changes (track.h, sock.h).
 */
static inline __attribute__((always_inline)) ssize_t
done_kernel(struct sock *sock, ssize_t ret, bool tx)
{
	int err = ret < 0 ? errno : 0;

	if (tx)
		track_tx(sock, ret, err);
	else
		track_rx(sock, ret, err);
	sock_put(sock);
	return ret;
}

/* done_kernel(), and the bytes by memory class once CUDA is found. */
static inline __attribute__((always_inline)) ssize_t
done_io(struct sock *sock, ssize_t ret, bool tx, const struct iovec *iov,
	int iovcnt)
{
	if (ret > 0 && cuda_mem_counting())
		count_classes(tx, iov, iovcnt, ret);
	return done_kernel(sock, ret, tx);
}

/* done_io() of a call with one buffer, which needs no iovec until CUDA. */
static inline __attribute__((always_inline)) ssize_t
done_io_buf(struct sock *sock, ssize_t ret, bool tx, const void *buf,
	    size_t len)
{
	if (ret > 0 && cuda_mem_counting())
		count_classes_buf(tx, buf, len, ret);
	return done_kernel(sock, ret, tx);
}

/*
 * An upgraded call's result (bytes or -errno) at the libc boundary.  One
 * that succeeds leaves errno as the call found it (entry), as the
 * kernel's do, whatever roceshim's own calls met on the way.  entry is
 * the caller's local: a signal handler's upgraded call in the middle of
 * this one must not change it.  Data moved: a connect in progress has
 * completed (as in track_tx()).
 */
static ssize_t done_upgraded(struct sock *sock, ssize_t ret, int entry)
{
	if (ret > 0)
		track_connect_result(sock, -1, 0);
	sock_put(sock);
	if (ret >= 0) {
		errno = entry;
		return ret;
	}
	errno = (int)-ret;
	return -1;
}

/* The tracked sock of fd with a reference, or NULL. */
static inline struct sock *tracked(int fd)
{
	shim_ensure_init();
	return shim_lookup(fd);
}

/* tracked(fd), but an upgraded sock goes to *upgraded instead. */
static struct sock *lookup(int fd, struct sock **upgraded)
{
	struct sock *sock = tracked(fd);

	*upgraded = sock && upgraded_carried(sock) ? sock : NULL;
	return *upgraded ? NULL : sock;
}

/* The kernel's cap on one call's bytes (MAX_RW_COUNT, 4 KiB pages). */
#define MAX_RW_COUNT (INT_MAX & ~4095)

/*
 * One buffer of send(), recv(), sendto() or recvfrom(): the kernel caps
 * its length before it checks the range (import_single_range()), where
 * read() and write() check all of it (vfs_read(): EFAULT past the address
 * space, and a length above SSIZE_MAX is past it).
 */
static struct iovec one_buffer(const void *buf, size_t len, bool capped)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	if (capped && len > MAX_RW_COUNT)
		iov.iov_len = MAX_RW_COUNT;
	return iov;
}

/* The kernel's read or recv, write or send. */
static inline __attribute__((always_inline)) ssize_t
kernel_recv(int fd, void *buf, size_t len, int flags, bool as_read)
{
	return as_read ? real.read(fd, buf, len)
		       : real.recv(fd, buf, len, flags);
}

static inline __attribute__((always_inline)) ssize_t
kernel_send(int fd, const void *buf, size_t len, int flags, bool as_write)
{
	return as_write ? real.write(fd, buf, len)
			: real.send(fd, buf, len, flags);
}

static ssize_t __attribute__((noinline))
upgraded_recv_buf(struct sock *sock, int fd, void *buf, size_t len, int flags,
		  bool as_read)
{
	struct iovec iov = one_buffer(buf, len, !as_read);
	int entry = errno;

	if (as_read && len > SSIZE_MAX)
		return done_upgraded(sock, -EFAULT, entry);
	return done_upgraded(sock,
			     as_read ? upgraded_read(sock, fd, &iov, 1, flags)
				     : upgraded_recv(sock, fd, &iov, 1, flags),
			     entry);
}

static ssize_t __attribute__((noinline))
upgraded_send_buf(struct sock *sock, int fd, const void *buf, size_t len,
		  int flags, bool as_write)
{
	struct iovec iov = one_buffer(buf, len, !as_write);
	int entry = errno;

	if (as_write && len > SSIZE_MAX)
		return done_upgraded(sock, -EFAULT, entry);
	return done_upgraded(sock, upgraded_send(sock, fd, &iov, 1, flags),
			     entry);
}

/*
 * A kernel socket's call that may be upgraded, or of a process that
 * loaded CUDA (its bytes by memory class, then).
 */
static ssize_t __attribute__((noinline))
maybe_upgraded_recv(struct sock *sock, int fd, void *buf, size_t len, int flags,
		    bool as_read)
{
	ssize_t ret;

	if (upgraded_carried(sock))
		return upgraded_recv_buf(sock, fd, buf, len, flags, as_read);
	ret = kernel_recv(fd, buf, len, flags, as_read);
	return done_io_buf(sock, ret, false, buf, len);
}

static ssize_t __attribute__((noinline))
maybe_upgraded_send(struct sock *sock, int fd, const void *buf, size_t len,
		    int flags, bool as_write)
{
	ssize_t ret;

	if (upgraded_carried(sock))
		return upgraded_send_buf(sock, fd, buf, len, flags, as_write);
	ret = kernel_send(fd, buf, len, flags, as_write);
	return done_io_buf(sock, ret, true, buf, len);
}

/*
 * read, write, recv and send: an untracked fd (rxe's doorbell, its
 * completion channel, files) goes straight to libc from the exported
 * wrapper, which stays small without lookup()'s frame; a tracked one
 * takes these.  A plain kernel socket's call keeps only the sock across
 * libc's, and needs no frame for the rest (docs/performance.md, "The
 * kernel-TCP path").
 */
static ssize_t __attribute__((noinline))
tracked_recv(struct sock *sock, int fd, void *buf, size_t len, int flags,
	     bool as_read)
{
	if (upgraded_maybe(sock) || cuda_mem_counting())
		return maybe_upgraded_recv(sock, fd, buf, len, flags, as_read);
	return done_kernel(sock, kernel_recv(fd, buf, len, flags, as_read),
			   false);
}

static ssize_t __attribute__((noinline))
tracked_send(struct sock *sock, int fd, const void *buf, size_t len, int flags,
	     bool as_write)
{
	if (upgraded_maybe(sock) || cuda_mem_counting())
		return maybe_upgraded_send(sock, fd, buf, len, flags, as_write);
	return done_kernel(sock, kernel_send(fd, buf, len, flags, as_write),
			   true);
}

static ssize_t shim_recvfrom(int fd, void *buf, size_t len, int flags,
			     struct sockaddr *from, socklen_t *fromlen)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	sock = lookup(fd, &up);
	if (up) {
		struct iovec iov = one_buffer(buf, len, true);

		/* A stream socket reports no source address. */
		if (from && fromlen)
			*fromlen = 0;
		return done_upgraded(up, upgraded_recv(up, fd, &iov, 1, flags),
				     entry);
	}
	ret = real.recvfrom(fd, buf, len, flags, from, fromlen);
	return sock ? done_io_buf(sock, ret, false, buf, len) : ret;
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	struct sock *sock = tracked(fd);

	if (!sock)
		return real.read(fd, buf, count);
	return tracked_recv(sock, fd, buf, count, 0, true);
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	struct sock *sock = tracked(fd);

	if (!sock)
		return real.write(fd, buf, count);
	return tracked_send(sock, fd, buf, count, 0, true);
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	sock = lookup(fd, &up);
	if (up)
		return done_upgraded(up, upgraded_read(up, fd, iov, iovcnt, 0),
				     entry);
	ret = real.readv(fd, iov, iovcnt);
	return sock ? done_io(sock, ret, false, iov, iovcnt) : ret;
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	sock = lookup(fd, &up);
	if (up)
		return done_upgraded(up, upgraded_send(up, fd, iov, iovcnt, 0),
				     entry);
	ret = real.writev(fd, iov, iovcnt);
	return sock ? done_io(sock, ret, true, iov, iovcnt) : ret;
}

/*
 * preadv2 and pwritev2 at the current position (offset -1) are readv and
 * writev on a socket: RWF_NOWAIT makes them non-blocking where the kernel
 * takes it, the other flags a socket accepts change nothing there, and
 * the rest are refused.  Any other offset is the kernel's ESPIPE.
 */
#define RWF_ON_SOCKETS \
	(RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND)

/*
 * Whether this kernel takes RWF_NOWAIT on a socket (not every kernel
 * does): asked once, of a socket pair of roceshim's own.  The pair is
 * made and closed inside the fd room, which a fork waits for: no child
 * inherits it.
 */
static bool sockets_take_nowait(void)
{
	static int answer; /* 0: not known yet, 1: yes, -1: no */
	int known = __atomic_load_n(&answer, __ATOMIC_ACQUIRE), pair[2];
	struct iovec iov = { .iov_base = &known, .iov_len = 1 };
	int err = errno;

	if (known)
		return known > 0;
	fd_room_enter();
	if (real.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair)) {
		known = 1;
		goto out;
	}
	/* A byte to read: the probe cannot block, whatever the kernel does. */
	(void)!real.write(pair[1], "", 1);
	known = real.preadv2(pair[0], &iov, 1, -1, RWF_NOWAIT) < 0 &&
				errno == EOPNOTSUPP
			? -1
			: 1;
	real.close(pair[0]);
	real.close(pair[1]);
	__atomic_store_n(&answer, known, __ATOMIC_RELEASE);
out:
	fd_room_leave();
	errno = err;
	return known > 0;
}

static ssize_t rw2_upgraded(struct sock *up, int fd, const struct iovec *iov,
			    int iovcnt, int flags, bool tx, int entry)
{
	int msg = flags & RWF_NOWAIT ? MSG_DONTWAIT : 0;

	if ((flags & ~RWF_ON_SOCKETS) ||
	    ((flags & RWF_NOWAIT) && !sockets_take_nowait()))
		return done_upgraded(up, -EOPNOTSUPP, entry);
	return done_upgraded(up,
			     tx ? upgraded_send(up, fd, iov, iovcnt, msg)
				: upgraded_read(up, fd, iov, iovcnt, msg),
			     entry);
}

static ssize_t rw2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
		   int flags, bool tx)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	sock = lookup(fd, &up);
	if (up && offset == -1)
		return rw2_upgraded(up, fd, iov, iovcnt, flags, tx, entry);
	sock = sock ? sock : up;
	if (tx) {
		ret = real.pwritev2(fd, iov, iovcnt, offset, flags);
		return sock ? done_io(sock, ret, true, iov, iovcnt) : ret;
	}
	ret = real.preadv2(fd, iov, iovcnt, offset, flags);
	return sock ? done_io(sock, ret, false, iov, iovcnt) : ret;
}

SHIM_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt,
			    off_t offset, int flags)
{
	return rw2(fd, iov, iovcnt, offset, flags, false);
}

SHIM_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt,
			     off_t offset, int flags)
{
	return rw2(fd, iov, iovcnt, offset, flags, true);
}

/* off_t is 64-bit on every ABI this builds for: one call serves both. */
SHIM_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int iovcnt,
			       off_t offset, int flags)
{
	return preadv2(fd, iov, iovcnt, offset, flags);
}

SHIM_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt,
				off_t offset, int flags)
{
	return pwritev2(fd, iov, iovcnt, offset, flags);
}

SHIM_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct sock *sock = tracked(fd);

	if (!sock)
		return real.recv(fd, buf, len, flags);
	return tracked_recv(sock, fd, buf, len, flags, false);
}

SHIM_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct sock *sock = tracked(fd);

	if (!sock)
		return real.send(fd, buf, len, flags);
	return tracked_send(sock, fd, buf, len, flags, false);
}

SHIM_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			     struct sockaddr *from, socklen_t *fromlen)
{
	return shim_recvfrom(fd, buf, len, flags, from, fromlen);
}

SHIM_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	sock = lookup(fd, &up);
	if (up) {
		struct iovec iov = one_buffer(buf, len, true);

		/* A connected stream ignores the address, as TCP does. */
		return done_upgraded(up, upgraded_send(up, fd, &iov, 1, flags),
				     entry);
	}
	ret = real.sendto(fd, buf, len, flags, to, tolen);
	if (!sock)
		return ret;
	if (flags & MSG_FASTOPEN)
		track_fastopen(sock, fd, to, tolen, ret);
	return done_io_buf(sock, ret, true, buf, len);
}

static ssize_t upgraded_sendmsg(struct sock *up, int fd,
				const struct msghdr *msg, int flags)
{
	if (msg->msg_iovlen > UIO_MAXIOV)
		return -EMSGSIZE;
	return upgraded_send(up, fd, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

static ssize_t upgraded_recvmsg(struct sock *up, int fd, struct msghdr *msg,
				int flags)
{
	ssize_t ret;

	if (msg->msg_iovlen > UIO_MAXIOV)
		return -EMSGSIZE;
	/* The kernel socket's error queue, with its control messages. */
	if (flags & MSG_ERRQUEUE) {
		ret = real.recvmsg(fd, msg, flags);
		return ret < 0 ? -errno : ret;
	}
	ret = upgraded_recv(up, fd, msg->msg_iov, (int)msg->msg_iovlen, flags);
	/* Written back only on success, the name's length only with a name. */
	if (ret >= 0) {
		if (msg->msg_name)
			msg->msg_namelen = 0;
		msg->msg_flags = 0;
		upgraded_put_control(up, fd, msg, ret);
	}
	return ret;
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	sock = lookup(fd, &up);
	if (up)
		return done_upgraded(up, upgraded_recvmsg(up, fd, msg, flags),
				     entry);
	ret = real.recvmsg(fd, msg, flags);
	return sock ? done_io(sock, ret, false, msg->msg_iov, msg->msg_iovlen)
		    : ret;
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	/* An upgraded socket sent to another process goes as TCP. */
	if (msg && msg->msg_controllen) {
		shim_ensure_init();
		track_fds_passed(msg);
	}
	sock = lookup(fd, &up);
	if (up)
		return done_upgraded(up, upgraded_sendmsg(up, fd, msg, flags),
				     entry);
	ret = real.sendmsg(fd, msg, flags);
	if (!sock)
		return ret;
	if (flags & MSG_FASTOPEN)
		track_fastopen(sock, fd, msg->msg_name, msg->msg_namelen, ret);
	return done_io(sock, ret, true, msg->msg_iov, msg->msg_iovlen);
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

/*
 * One message after another, each with the caller's flags, as the
 * kernel's loop makes them (do_recvmmsg(), __sys_sendmmsg()): a blocking
 * one waits for every message, unless MSG_WAITFORONE makes the rest
 * non-blocking once one has come; a timeout is looked at between
 * messages.  At the end of the stream every message left reads as empty.
 */
static int upgraded_mmsg(struct sock *up, int fd, struct mmsghdr *vec,
			 unsigned int vlen, int flags,
			 const struct timespec *timeout, bool tx, int entry)
{
	int64_t deadline = -1;
	ssize_t ret = 0;
	unsigned int i;

	if (!wait_time_valid(timeout)) {
		sock_put(up);
		errno = EINVAL;
		return -1;
	}
	if (timeout)
		deadline = clock_ms() + wait_time_ms(timeout);
	for (i = 0; i < vlen; i++) {
		struct msghdr *m = &vec[i].msg_hdr;

		ret = tx ? upgraded_sendmsg(up, fd, m, flags)
			 : upgraded_recvmsg(up, fd, m, flags & ~MSG_WAITFORONE);
		if (ret < 0)
			break;
		vec[i].msg_len = ret;
		if (!tx && flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (deadline >= 0 && clock_ms() >= deadline) {
			i++;
			break;
		}
	}
	sock_put(up);
	if (i || ret >= 0) {
		errno = entry;
		return i;
	}
	errno = (int)-ret;
	return -1;
}

SHIM_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			 int flags, struct timespec *timeout)
{
	struct sock *sock, *up;
	int entry = errno;
	int ret;

	sock = lookup(fd, &up);
	if (up)
		return upgraded_mmsg(up, fd, vec, vlen, flags, timeout, false,
				     entry);
	ret = real.recvmmsg(fd, vec, vlen, flags, timeout);
	return sock ? done_mmsg(sock, ret, vec, false) : ret;
}

SHIM_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			 int flags)
{
	struct sock *sock, *up;
	int entry = errno;
	unsigned int i;
	int ret;

	shim_ensure_init();
	for (i = 0; vec && i < vlen; i++)
		if (vec[i].msg_hdr.msg_controllen)
			track_fds_passed(&vec[i].msg_hdr);
	sock = lookup(fd, &up);
	if (up)
		return upgraded_mmsg(up, fd, vec, vlen, flags, NULL, true,
				     entry);
	ret = real.sendmmsg(fd, vec, vlen, flags);
	return sock ? done_mmsg(sock, ret, vec, true) : ret;
}

/*
 * sendfile into an upgraded socket, a chunk at a time, on the program's
 * stack.  As the kernel's, it goes on until count is sent, the file ends,
 * or the socket takes no more (non-blocking, a signal, an error), and
 * then reports what it sent; an error only if it sent nothing.
 */
static ssize_t upgraded_sendfile(struct sock *up, int out_fd, int in_fd,
				 off_t *offset, size_t count)
{
	char buf[32768];
	struct iovec iov = { .iov_base = buf };
	size_t want, done = 0;
	ssize_t got, sent;

	/* rw_verify_area() in do_sendfile(). */
	if (count > MAX_RW_COUNT)
		count = MAX_RW_COUNT;
	while (done < count) {
		want = count - done < sizeof(buf) ? count - done : sizeof(buf);
		got = offset ? pread(in_fd, buf, want, *offset)
			     : real.read(in_fd, buf, want);
		if (got <= 0) {
			if (got < 0 && !done)
				return -errno;
			break;
		}
		iov.iov_len = got;
		sent = upgraded_send(up, out_fd, &iov, 1, 0);
		if (sent > 0) {
			done += sent;
			if (offset)
				*offset += sent;
		}
		if (sent == got)
			continue;
		if (!offset)
			lseek(in_fd, (sent > 0 ? sent : 0) - got, SEEK_CUR);
		if (sent < 0 && !done)
			return sent;
		break;
	}
	return done;
}

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	struct sock *sock, *up;
	int entry = errno;
	ssize_t ret;

	sock = lookup(out_fd, &up);
	if (up)
		return done_upgraded(
			up, upgraded_sendfile(up, out_fd, in_fd, offset, count),
			entry);
	ret = real.sendfile(out_fd, in_fd, offset, count);
	return sock ? done_io(sock, ret, true, NULL, 0) : ret;
}

/* off_t is 64-bit on every ABI this builds for: one call serves both. */
SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset,
			       size_t count)
{
	return sendfile(out_fd, in_fd, offset, count);
}

/* splice() needs a pipe at one end, or the kernel refuses it. */
static bool is_pipe(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISFIFO(st.st_mode);
}

/*
 * What a connection that is not plain yet (its peer has gone, or bytes
 * that moved with it still wait) has for the pipe fd_out: peeked, written
 * and consumed as far as the pipe took it.  As the kernel does, it waits
 * for room in the pipe unless SPLICE_F_NONBLOCK, and then writes at most
 * PIPE_BUF, which one free slot of a pipe takes without blocking.
 */
static ssize_t splice_from_ring(struct sock *up, int fd_in, int fd_out,
				size_t len, unsigned int flags)
{
	char buf[PIPE_BUF];
	struct iovec iov = { .iov_base = buf,
			     .iov_len = len < sizeof(buf) ? len : sizeof(buf) };
	struct pollfd pipe_room = { .fd = fd_out, .events = POLLOUT };
	ssize_t n;

	n = real.poll(&pipe_room, 1, flags & SPLICE_F_NONBLOCK ? 0 : -1);
	if (n < 0)
		return -errno;
	if (!n)
		return -EAGAIN;
	n = upgraded_recv(up, fd_in, &iov, 1, MSG_PEEK);
	if (n <= 0)
		return n;
	n = real.write(fd_out, buf, n);
	if (n <= 0)
		return n < 0 ? -errno : 0;
	iov.iov_len = n;
	return upgraded_recv(up, fd_in, &iov, 1, 0);
}

/*
 * An upgraded socket at one end of a splice moves to its kernel socket:
 * the kernel moves the bytes, and they never pass through roceshim.  0,
 * or -EAGAIN while its connect is still in the background.
 */
static int splice_end(struct sock *up)
{
	int err = upgraded_make_plain(up, ROCESHIM_DOWNGRADE_SPLICE);

	return err == -EAGAIN && upgraded_carried(up) ? err : 0;
}

#define SPLICE_F_ALL \
	(SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT)

SHIM_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out,
			   loff_t *off_out, size_t len, unsigned int flags)
{
	struct sock *up_in, *up_out, *in, *out;
	bool counted = false, moves;
	ssize_t ret;
	int err = 0, entry = errno;

	in = lookup(fd_in, &up_in);
	out = lookup(fd_out, &up_out);
	/* What the kernel refuses or does nothing with moves nothing. */
	moves = len && !(flags & ~SPLICE_F_ALL) && !off_in && !off_out;
	if (moves && up_in && is_pipe(fd_out)) {
		err = splice_end(up_in);
		if (!err && upgraded_carried(up_in)) {
			ret = splice_from_ring(up_in, fd_in, fd_out, len,
					       flags);
			counted = true;
			goto out;
		}
	}
	if (moves && !err && up_out && is_pipe(fd_in)) {
		err = splice_end(up_out);
		if (!err && upgraded_carried(up_out))
			err = upgraded_kernel_ready(up_out, fd_out);
	}
	if (err) {
		ret = err;
		goto out;
	}
	ret = real.splice(fd_in, off_in, fd_out, off_out, len, flags);
	if (ret < 0)
		ret = -errno;
out:
	/* Either is the sock of its fd, with a reference, or NULL. */
	in = in ? in : up_in;
	out = out ? out : up_out;
	if (in && !counted)
		track_rx(in, ret, (int)-ret);
	if (out)
		track_tx(out, ret, (int)-ret);
	if (in)
		sock_put(in);
	if (out)
		sock_put(out);
	if (ret >= 0) {
		errno = entry;
		return ret;
	}
	errno = (int)-ret;
	return -1;
}

SHIM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen)
{
	if (nbytes > buflen)
		__chk_fail();
	return read(fd, buf, nbytes);
}

SHIM_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			       int flags)
{
	if (len > buflen)
		__chk_fail();
	return recv(fd, buf, len, flags);
}

SHIM_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
				   int flags, struct sockaddr *from,
				   socklen_t *fromlen)
{
	if (len > buflen)
		__chk_fail();
	return shim_recvfrom(fd, buf, len, flags, from, fromlen);
}
