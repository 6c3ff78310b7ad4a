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
 * stream behaves as an fdopen()'d one: the same modes, a failed call sets
 * its error indicator, and fclose() closes the fd.  These are the
 * program's own calls, so they go through the exported read(), write()
 * and close() on purpose, not through `real`.  libc flushes streams at
 * exit only after roceshim has ended its RDMA connections, so a
 * connection with such a stream moves to TCP at exit instead
 * (track_exit()).  A socket dup'd onto fd 0, 1 or 2, which stdin, stdout
 * and stderr use, moves to TCP at once (track_dup_result()).
 */
#include <errno.h>
#include <fcntl.h>
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

/* fd's sock with a reference, if roceshim carries its calls; else NULL. */
static struct sock *carried_sock(int fd)
{
	struct sock *sock;

	shim_ensure_init();
	sock = shim_lookup(fd);
	if (sock && !upgraded_carried(sock)) {
		sock_put(sock);
		sock = NULL;
	}
	return sock;
}

static bool carried_fd(int fd)
{
	struct sock *sock = carried_sock(fd);

	if (!sock)
		return false;
	sock_put(sock);
	return true;
}

static int fd_of(void *cookie)
{
	return (int)(intptr_t)cookie;
}

static ssize_t stream_read(void *cookie, char *buf, size_t size)
{
	return read(fd_of(cookie), buf, size);
}

/*
 * As libc's file stream does: all of it, or what went before an error,
 * with errno.  Never negative: libc takes the result as a count.
 */
static ssize_t stream_write(void *cookie, const char *buf, size_t size)
{
	size_t done = 0;
	ssize_t n;

	while (done < size) {
		n = write(fd_of(cookie), buf + done, size - done);
		if (n <= 0)
			break;
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

static int stream_close(void *cookie)
{
	return close(fd_of(cookie));
}

static const cookie_io_functions_t socket_stream = {
	.read = stream_read,
	.write = stream_write,
	.seek = stream_seek,
	.close = stream_close,
};

/*
 * fopencookie() reads only "r", "w" or "a" and a '+' right after it (or
 * after a 'b'); fdopen() takes a '+' among the next four characters.
 */
static void cookie_mode(const char *mode, char out[3])
{
	size_t i;

	out[0] = mode[0];
	out[1] = out[2] = '\0';
	for (i = 1; i < 5 && mode[0] && mode[i]; i++)
		if (mode[i] == '+')
			out[1] = '+';
}

SHIM_EXPORT FILE *fdopen(int fd, const char *mode)
{
	struct sock *sock = carried_sock(fd);
	char how[3];
	FILE *f;
	int fl;

	if (!sock)
		return real.fdopen(fd, mode);
	cookie_mode(mode, how);
	/* As fdopen() does for "a". */
	if (how[0] == 'a') {
		fl = real.fcntl(fd, F_GETFL);
		if (fl < 0 || (!(fl & O_APPEND) &&
			       real.fcntl(fd, F_SETFL, fl | O_APPEND) < 0)) {
			sock_put(sock);
			return NULL;
		}
	}
	f = fopencookie((void *)(intptr_t)fd, how, socket_stream);
	if (f) {
		f->_fileno = fd;
		__atomic_store_n(&sock->stdio_stream, true, __ATOMIC_RELEASE);
	}
	sock_put(sock);
	return f;
}

/*
 * vdprintf() on a carried socket: formatted (checked as __vsnprintf_chk
 * checks, for flag > 0), then written whole.
 */
static int print_to(int fd, int flag, const char *format, va_list ap)
{
	char small[512], *buf = small;
	int len, err = errno;
	va_list again;
	ssize_t n;

	va_copy(again, ap);
	len = __vsnprintf_chk(small, sizeof(small), flag, sizeof(small), format,
			      ap);
	if (len >= (int)sizeof(small)) {
		buf = malloc((size_t)len + 1);
		/* The same text again: %m prints errno. */
		errno = err;
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
