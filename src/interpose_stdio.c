// SPDX-License-Identifier: MIT
/*
 * libc's own I/O on a socket: a stream from fdopen(), and dprintf().
 * libc makes their system calls inside itself, where no wrapper sees them,
 * so on a socket whose calls roceshim carries (upgraded_carried()) they
 * would read and write the kernel socket beside the RDMA connection: a
 * read that never returns, bytes the peer never sees.
 *
 * So fdopen() of such a socket gives a stream whose reads, writes and
 * close are the exported wrappers' (fopencookie), with fileno() still the
 * socket's, and dprintf() formats first and writes through them.  The
 * stream behaves as an fdopen()'d one: buffered the same way, a failed
 * call sets its error indicator, and fclose() closes the fd.  These are
 * the program's own calls, so they go through the exported read(),
 * write() and close() on purpose, not through `real`.  A socket dup'd
 * onto fd 0, 1 or 2, which stdin, stdout and stderr use, moves to TCP
 * instead (track_dup_result()).  At exit, such streams are flushed
 * before roceshim ends its connections (shim_stdio_exit()).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "real.h"
#include "shim.h"
#include "upgraded.h"

/* The _FORTIFY_SOURCE entry points; glibc declares them only when fortified. */
int __dprintf_chk(int fd, int flag, const char *format, ...);
int __vdprintf_chk(int fd, int flag, const char *format, va_list ap);
int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen,
		    const char *format, va_list ap);

/* Whether roceshim carries fd's calls. */
static bool carried_fd(int fd)
{
	struct sock *sock;
	bool carried;

	shim_ensure_init();
	sock = shim_lookup(fd);
	if (!sock)
		return false;
	carried = upgraded_carried(sock);
	sock_put(sock);
	return carried;
}

static int fd_of(void *cookie)
{
	return (int)(intptr_t)cookie;
}

static ssize_t stream_read(void *cookie, char *buf, size_t size)
{
	return read(fd_of(cookie), buf, size);
}

/* As libc's file stream does: all of it, or what went before an error. */
static ssize_t stream_write(void *cookie, const char *buf, size_t size)
{
	size_t done = 0;
	ssize_t n;

	while (done < size) {
		n = write(fd_of(cookie), buf + done, size - done);
		if (n <= 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int stream_seek(void *cookie, off64_t *offset, int whence)
{
	(void)cookie;
	(void)offset;
	(void)whence;
	errno = ESPIPE;
	return -1;
}

/* Streams of fdopen() that write through the wrappers, not yet closed. */
static unsigned int open_streams;

static int stream_close(void *cookie)
{
	__atomic_sub_fetch(&open_streams, 1, __ATOMIC_RELAXED);
	return close(fd_of(cookie));
}

static const cookie_io_functions_t socket_stream = {
	.read = stream_read,
	.write = stream_write,
	.seek = stream_seek,
	.close = stream_close,
};

SHIM_EXPORT FILE *fdopen(int fd, const char *mode)
{
	FILE *f;

	if (!carried_fd(fd))
		return real.fdopen(fd, mode);
	f = fopencookie((void *)(intptr_t)fd, mode, socket_stream);
	if (f) {
		f->_fileno = fd;
		__atomic_add_fetch(&open_streams, 1, __ATOMIC_RELAXED);
	}
	return f;
}

/*
 * libc flushes its streams after the atexit handlers and destructors, by
 * when roceshim has ended its connections over RDMA: a stream's last
 * bytes, not flushed by the program, would meet a closed connection.
 */
void shim_stdio_exit(void)
{
	if (__atomic_load_n(&open_streams, __ATOMIC_RELAXED))
		fflush(NULL);
}

/*
 * vdprintf() on a carried socket: formatted (checked as __vsnprintf_chk
 * checks, for flag > 0), then written whole.
 */
static int print_to(int fd, int flag, const char *format, va_list ap)
{
	char small[512], *buf = small;
	va_list again;
	int len, err;
	ssize_t n;

	va_copy(again, ap);
	len = __vsnprintf_chk(small, sizeof(small), flag, sizeof(small), format,
			      ap);
	if (len >= (int)sizeof(small)) {
		buf = malloc((size_t)len + 1);
		if (buf)
			__vsnprintf_chk(buf, (size_t)len + 1, flag,
					(size_t)len + 1, format, again);
	}
	va_end(again);
	if (len < 0 || !buf)
		return -1;
	n = stream_write((void *)(intptr_t)fd, buf, (size_t)len);
	err = errno;
	if (buf != small)
		free(buf);
	errno = err;
	return n == len ? len : -1;
}

SHIM_EXPORT int vdprintf(int fd, const char *format, va_list ap)
{
	if (!carried_fd(fd))
		return real.vdprintf(fd, format, ap);
	return print_to(fd, 0, format, ap);
}

SHIM_EXPORT int __vdprintf_chk(int fd, int flag, const char *format, va_list ap)
{
	if (!carried_fd(fd))
		return real.vdprintf_chk
			       ? real.vdprintf_chk(fd, flag, format, ap)
			       : real.vdprintf(fd, format, ap);
	return print_to(fd, flag, format, ap);
}

SHIM_EXPORT int dprintf(int fd, const char *format, ...)
{
	va_list ap;
	int ret;

	va_start(ap, format);
	ret = vdprintf(fd, format, ap);
	va_end(ap);
	return ret;
}

SHIM_EXPORT int __dprintf_chk(int fd, int flag, const char *format, ...)
{
	va_list ap;
	int ret;

	va_start(ap, format);
	ret = __vdprintf_chk(fd, flag, format, ap);
	va_end(ap);
	return ret;
}
