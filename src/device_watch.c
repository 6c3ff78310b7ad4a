// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device.h"
#include "device_watch.h"
#include "fd_room.h"
#include "fork_page.h"
#include "log.h"
#include "progress.h"
#include "rdma_stack.h"
#include "real.h"

/* The kernel's own uevents (udev's are on another group). */
#define UEVENT_KERNEL_GROUP 1u
/* The class whose entries libibverbs lists the devices by. */
#define VERBS_SUBSYSTEM "SUBSYSTEM=infiniband_verbs"
/*
 * Messages read per wake-up: a storm of them (or a sender allowed to
 * write to the group) must not keep the thread from its other work.
 */
#define UEVENTS_PER_CALL 64

static struct {
	pthread_mutex_t lock;
	int fd;
	bool tried;
	struct progress_watcher watcher;
} dw FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* Whether field (NUL-terminated) is one of msg's NUL-separated fields. */
static bool has_field(const char *msg, size_t len, const char *field)
{
	size_t flen = strlen(field), at = 0;
	const char *end;

	while (at < len) {
		end = memchr(msg + at, '\0', len - at);
		if (!end)
			end = msg + len;
		if ((size_t)(end - (msg + at)) == flen &&
		    !memcmp(msg + at, field, flen))
			return true;
		at = (size_t)(end - msg) + 1;
	}
	return false;
}

bool device_uevent_changes_verbs(const char *msg, size_t len)
{
	return (has_field(msg, len, "ACTION=remove") ||
		has_field(msg, len, "ACTION=add")) &&
	       has_field(msg, len, VERBS_SUBSYSTEM);
}

/*
 * Lists the devices again: librdmacm closes the context of each one that
 * went, now if nothing uses it, else once the last user lets it go, and
 * opens each new one.
 */
static void relist(void)
{
	log_info("the RDMA devices changed; listed again");
	device_release(device_hold());
}

static void on_uevents(struct progress_watcher *w, uint32_t events)
{
	struct sockaddr_nl from;
	bool changed = false;
	char msg[8192];
	socklen_t len;
	unsigned int i;
	ssize_t n;

	(void)w;
	(void)events;
	for (i = 0; i < UEVENTS_PER_CALL; i++) {
		len = sizeof(from);
		n = real.recvfrom(__atomic_load_n(&dw.fd, __ATOMIC_ACQUIRE),
				  msg, sizeof(msg), MSG_DONTWAIT,
				  (struct sockaddr *)&from, &len);
		if (n < 0 && errno == EINTR)
			continue;
		/* Messages were lost: one of them may have been a change. */
		if (n < 0 && errno == ENOBUFS) {
			changed = true;
			continue;
		}
		if (n < 0)
			break;
		/* Only the kernel's word counts, not another process's. */
		if (len == sizeof(from) && from.nl_family == AF_NETLINK &&
		    from.nl_pid == 0 &&
		    device_uevent_changes_verbs(msg, (size_t)n))
			changed = true;
	}
	if (changed)
		relist();
}

/*
 * Under dw.lock: the kernel's uevents, on a socket out of the way, or -1.
 * Stored before fd_room_leave(): a fork waits for that, and its child
 * then knows the socket to close.
 */
static int open_uevents_locked(void)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK,
				    .nl_groups = UEVENT_KERNEL_GROUP };
	int fd, hidden = -1;

	fd_room_enter();
	fd = real.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			 NETLINK_KOBJECT_UEVENT);
	if (fd >= 0 && !real.bind(fd, (struct sockaddr *)&addr, sizeof(addr)))
		hidden = fd_room_hide(fd);
	/* The watch is optional: it takes no number the program needs. */
	if (fd >= 0 && hidden < 0)
		real.close(fd);
	__atomic_store_n(&dw.fd, hidden, __ATOMIC_RELEASE);
	fd_room_leave();
	return hidden;
}

void device_watch_start(void)
{
	int fd;

	if (__atomic_load_n(&dw.tried, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&dw.lock);
	if (dw.tried || !rdma_stack_private() || !progress_running())
		goto out;
	__atomic_store_n(&dw.tried, true, __ATOMIC_RELEASE);
	dw.watcher.fn = on_uevents;
	fd = open_uevents_locked();
	if (fd < 0 || progress_add(fd, EPOLLIN, &dw.watcher)) {
		log_debug("cannot watch for RDMA devices added or removed");
		__atomic_store_n(&dw.fd, -1, __ATOMIC_RELEASE);
		if (fd >= 0)
			real.close(fd);
	}
out:
	pthread_mutex_unlock(&dw.lock);
}

void FORK_CODE device_watch_fork_child(bool fds_shared)
{
	pthread_mutex_init(&dw.lock, NULL);
	if (dw.fd >= 0 && !fds_shared)
		real.close(dw.fd);
	dw.fd = -1;
	/* Nothing starts it again: the child's progress thread never runs. */
	dw.tried = true;
}
