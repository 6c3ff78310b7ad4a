// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd_room.h"
#include "fork_page.h"
#include "log.h"
#include "real.h"
#include "reuseport.h"
#include "share.h"
#include "tcp_diag.h"

/*
 * The name: the port, then where a joiner finds the region (the pid, the
 * memfd's number there and its inode, which tells a process of another
 * pid namespace that names the same pid).  Abstract names live in the
 * network namespace, as the port does.
 */
#define NAME_PREFIX "roceshim-reuseport:"
/* The names this process holds, closed in a fork child. */
#define NAMES_MAX 64

static struct {
	pthread_mutex_t lock;
	int fds[NAMES_MAX];
	unsigned int count;
} names FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool remember_name(int name_fd)
{
	bool kept = false;

	pthread_mutex_lock(&names.lock);
	if (names.count < NAMES_MAX) {
		names.fds[names.count++] = name_fd;
		kept = true;
	}
	pthread_mutex_unlock(&names.lock);
	return kept;
}

static void forget_name(int name_fd)
{
	unsigned int i;

	pthread_mutex_lock(&names.lock);
	for (i = 0; i < names.count; i++) {
		if (names.fds[i] == name_fd) {
			names.fds[i] = names.fds[--names.count];
			break;
		}
	}
	pthread_mutex_unlock(&names.lock);
}

/* A datagram socket bound to the abstract name in sun, hidden; -errno. */
static int bind_name(const struct sockaddr_un *sun, int len)
{
	int fd, hidden, err;

	fd_room_enter();
	fd = real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	hidden = fd < 0 ? -errno : fd_room_keep(fd);
	fd_room_leave();
	if (hidden < 0)
		return hidden;
	if (real.bind(hidden, (const struct sockaddr *)sun,
		      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				  len))) {
		err = -errno;
		real.close(hidden);
		return err;
	}
	return hidden;
}

int reuseport_hold(uint16_t port, uint64_t listener)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int err = errno, region, name_fd, len, others;
	uint64_t region_ino;

	/* A joiner opens the region through /proc, which that would refuse. */
	if (real.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1) {
		name_fd = -EPERM;
		goto out;
	}
	region = share_region_fd(&region_ino);
	if (region < 0) {
		name_fd = region;
		goto out;
	}
	len = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
		       NAME_PREFIX "%u:%d:%d:%llu", (unsigned int)port,
		       (int)getpid(), region, (unsigned long long)region_ino);
	name_fd = bind_name(&sun, len);
	if (name_fd < 0)
		goto out;
	/* After the name: a listener that comes later finds it. */
	others = tcp_diag_listeners(port, listener, NULL);
	if (others || !remember_name(name_fd)) {
		real.close(name_fd);
		name_fd = others < 0 ? others : others ? -EADDRINUSE : -ENOSPC;
	}
out:
	errno = err;
	return name_fd;
}

void reuseport_release(int name_fd)
{
	int err = errno;

	if (name_fd < 0)
		return;
	forget_name(name_fd);
	real.close(name_fd);
	errno = err;
}

void FORK_CODE reuseport_fork_child(bool fds_shared)
{
	unsigned int i;

	pthread_mutex_init(&names.lock, NULL);
	if (!fds_shared)
		for (i = 0; i < names.count; i++)
			real.close(names.fds[i]);
	names.count = 0;
}

/*
 * A decimal number at *p, at most max, that ends at one of the bytes of
 * stops (its NUL included); *p then points past that byte.
 */
static bool parse_number(const char **p, const char *stops, size_t n_stops,
			 unsigned long long max, unsigned long long *out)
{
	unsigned long long v;
	char *end;

	if (**p < '0' || **p > '9')
		return false;
	errno = 0;
	v = strtoull(*p, &end, 10);
	if (errno || v > max || !memchr(stops, *end, n_stops))
		return false;
	*out = v;
	*p = end + 1;
	return true;
}

/* The path column of a line of /proc/net/unix: after seven fields. */
static const char *path_column(const char *line)
{
	const char *p = line;
	int field;

	for (field = 0; field < 7; field++) {
		p += strspn(p, " ");
		if (!*p || *p == '\n')
			return NULL;
		p += strcspn(p, " \n");
	}
	return *p == ' ' ? p + 1 : NULL;
}

bool reuseport_parse_line(const char *line, uint16_t port,
			  struct reuseport_holder *holder)
{
	static const char tag[] = "@" NAME_PREFIX;
	static const char colon[] = ":", last[] = "\n";
	const char *p = path_column(line);
	unsigned long long got_port, got_pid, got_fd, got_ino;

	if (!p || strncmp(p, tag, sizeof(tag) - 1))
		return false;
	p += sizeof(tag) - 1;
	if (!parse_number(&p, colon, 1, UINT16_MAX, &got_port) ||
	    !parse_number(&p, colon, 1, INT_MAX, &got_pid) ||
	    !parse_number(&p, colon, 1, INT_MAX, &got_fd) ||
	    !parse_number(&p, last, sizeof(last), UINT64_MAX, &got_ino) ||
	    got_port != port || got_pid == 0 || got_ino == 0)
		return false;
	holder->pid = (int)got_pid;
	holder->fd = (int)got_fd;
	holder->ino = got_ino;
	return true;
}

/*
 * Joins the holder a line names, if it names one of port: its
 * JOINED_* bits.
 */
static unsigned int join_line(const char *line, uint16_t port,
			      uint64_t listener)
{
	struct reuseport_holder holder;
	int ret;

	if (!reuseport_parse_line(line, port, &holder))
		return 0;
	ret = share_join(holder.pid, holder.fd, holder.ino, listener);
	if (ret < 0) {
		log_info("port %u: cannot join the RDMA listener of process %d "
			 "(%s)",
			 (unsigned int)port, holder.pid, strerror(-ret));
		return 0;
	}
	return ret ? REUSEPORT_JOINED_OWN : REUSEPORT_JOINED_OTHER;
}

unsigned int reuseport_join(uint16_t port, uint64_t listener)
{
	char buf[4096 + 1];
	size_t have = 0;
	int err = errno, fd;
	unsigned int found = 0;
	char *line, *nl;
	ssize_t n;

	fd_room_enter();
	fd = open("/proc/net/unix", O_RDONLY | O_CLOEXEC);
	fd = fd < 0 ? -errno : fd_room_keep(fd);
	fd_room_leave();
	if (fd < 0)
		goto out;
	for (;;) {
		n = real.read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		for (line = buf; (nl = strchr(line, '\n')); line = nl + 1) {
			nl[0] = '\0';
			found |= join_line(line, port, listener);
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		/* A line longer than the buffer names no holder. */
		if (have == sizeof(buf) - 1)
			have = 0;
	}
	if (have) {
		buf[have] = '\0';
		found |= join_line(buf, port, listener);
	}
	real.close(fd);
out:
	errno = err;
	return found;
}

int reuseport_strangers(uint16_t port, uint64_t holder)
{
	return tcp_diag_listeners(port, holder, share_listener_joined);
}
