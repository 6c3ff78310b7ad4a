// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "endpoint.h"
#include "fd_room.h"
#include "fork_page.h"
#include "log.h"
#include "progress.h"
#include "real.h"
#include "share.h"

/*
 * One region for the process, mapped when the RDMA side starts, so that
 * every child forked later sees all of it: its pages are touched only as
 * slots are used.  It is a memfd, so that a descendant's exec can hand it
 * to the new image.
 */
#define SLOTS	     16384
#define NAME_MAX_LEN 64
#define MEMFD_NAME   "roceshim-share"
#define REGION_MAGIC 0x72736832u /* "rsh2": this layout */
/*
 * As long as a pending connection may wait: once established,
 * PENDING_GONE_MS; before, PENDING_TIMEOUT_MS (handshake_server.c).
 */
#define SHARE_PENDING_MS   600000
#define SHARE_HANDSHAKE_MS 30000
/* The other processes whose listeners share a port with this one's. */
#define SHARE_JOINED_MAX 8
/* The listeners, of any process, that joined one region. */
#define SHARE_LISTENERS_MAX 16

struct share_slot {
	uint32_t state;	  /* atomic: enum share_state; a futex word */
	uint32_t request; /* atomic: a descendant asks */
	uint32_t pending; /* atomic: enum share_pending; a futex word */
	uint16_t port;	  /* pending: the listener's port */
	uint16_t pad;
	/*
	 * Pending: claimable until then (clock_ms()).  An owner that died
	 * leaves its slots as they were, and a later client may come from
	 * the same source.
	 */
	int64_t expires_ms;
	struct roceshim_stats_endpoint source; /* pending: the TCP source */
	uint8_t reserved[64 - 24 - sizeof(struct roceshim_stats_endpoint)];
};

_Static_assert(sizeof(struct share_slot) == 64, "a slot is a cache line");

struct region {
	/* The owner's request socket: an abstract unix name, NUL first. */
	char name[NAME_MAX_LEN];
	uint32_t name_len;
	uint32_t used; /* atomic: no slot at or above was ever used */
	uint32_t magic;
	uint32_t pad0;
	uint64_t dev, ino; /* the memfd's: a new image checks its copy */
	/*
	 * Atomic: the inodes of the listening sockets that joined the
	 * region (share_join()); 0: a free entry.
	 */
	uint64_t listeners[SHARE_LISTENERS_MAX];
	uint8_t pad[32];
	struct share_slot slots[SLOTS];
};

_Static_assert(offsetof(struct region, slots) % 64 == 0,
	       "a slot on one cache line");

/*
 * A region this process maps, and what it knows of it for itself (the
 * region's own words are any holder's to write).
 */
struct region_ref {
	struct region *r;
	/*
	 * Its memfd, hidden; -1: not a memfd.  A fork child that closed its
	 * copy finds the same number in the process that made it, holder.
	 */
	int fd;
	int holder_pid;
	uint64_t dev, ino;
};

static struct {
	pthread_mutex_t lock;
	struct region_ref own;	    /* the owner's, or an inherited one */
	struct region_ref imported; /* handed over an exec: share_import() */
	/* Other processes' regions: share_join(); mapped for good. */
	struct region_ref joined[SHARE_JOINED_MAX];
	unsigned int joined_count; /* atomic */
	bool owner;		   /* own is ours to hand out and serve */
	void **ctx;		   /* owner only: per slot, NULL while free */
	unsigned int next;	   /* where the search for a free slot starts */
	int sock;		   /* the request socket; -1 */
	struct progress_watcher watcher;
	void (*on_request)(void *ctx);
} sh FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER,
		   .own = { .fd = -1 },
		   .imported = { .fd = -1 },
		   .sock = -1 };

/* The memfd exported for an exec under way on this thread; -1. */
static __thread int exported_fd = -1;
/* Atomic: a new program was given the region (share_exported()). */
static bool exported;

static long futex(uint32_t *word, int op, uint32_t val,
		  const struct timespec *timeout)
{
	return real.syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/* Datagrams only wake the owner: every slot says what it wants. */
static void serve_requests(struct progress_watcher *w, uint32_t events)
{
	char drain[64];
	unsigned int i;
	void *ctx;

	(void)w;
	(void)events;
	while (real.recv(sh.sock, drain, sizeof(drain), MSG_DONTWAIT) >= 0)
		;
	for (i = 0; i < __atomic_load_n(&sh.own.r->used, __ATOMIC_ACQUIRE) &&
		    i < SLOTS;
	     i++) {
		pthread_mutex_lock(&sh.lock);
		ctx = sh.ctx[i];
		if (ctx && !__atomic_exchange_n(&sh.own.r->slots[i].request, 0,
						__ATOMIC_ACQ_REL))
			ctx = NULL;
		pthread_mutex_unlock(&sh.lock);
		/* Outside the lock: it may free the slot. */
		if (ctx)
			sh.on_request(ctx);
	}
}

/* Under sh.lock: the request socket, bound to a name no one can guess. */
static int open_request_socket_locked(struct region *r)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint64_t nonce = 0;
	int fd, hidden, len;

	if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
		nonce = (uint64_t)clock_us() ^ ((uint64_t)getpid() << 32);
	len = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
		       "roceshim-%d-%016llx", (int)getpid(),
		       (unsigned long long)nonce);
	if (len <= 0 || len + 1 > NAME_MAX_LEN)
		return -EINVAL;
	fd_room_enter();
	fd = real.socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	hidden = fd < 0 ? -errno : fd_room_keep(fd);
	fd_room_leave();
	if (hidden < 0)
		return hidden;
	fd = hidden;
	if (real.bind(fd, (struct sockaddr *)&sun,
		      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				  len))) {
		int err = -errno;

		real.close(fd);
		return err;
	}
	sh.watcher.fn = serve_requests;
	if (progress_add(fd, EPOLLIN, &sh.watcher)) {
		real.close(fd);
		return -ESRCH;
	}
	memcpy(r->name, sun.sun_path, (size_t)len + 1);
	r->name_len = (uint32_t)len + 1;
	sh.sock = fd;
	return 0;
}

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

/*
 * A memfd of size bytes for a region, hidden, sealed at that size (no
 * holder can make the others' mappings fault); -errno.
 */
static int region_memfd(size_t size)
{
	const unsigned int flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	struct rlimit fsize;
	int fd, hidden;

	/* Past RLIMIT_FSIZE, ftruncate() raises SIGXFSZ, which kills. */
	if (!getrlimit(RLIMIT_FSIZE, &fsize) &&
	    fsize.rlim_cur != RLIM_INFINITY && fsize.rlim_cur < size)
		return -EFBIG;
	fd_room_enter();
	/* Kernels before 6.3 know no MFD_NOEXEC_SEAL. */
	fd = memfd_create(MEMFD_NAME, flags | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(MEMFD_NAME, flags);
	hidden = fd < 0 ? -errno : fd_room_keep(fd);
	fd_room_leave();
	if (hidden < 0)
		return hidden;
	if (ftruncate(hidden, size) ||
	    real.fcntl(hidden, F_ADD_SEALS,
		       F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int err = -errno;

		real.close(hidden);
		return err;
	}
	return hidden;
}

/*
 * A new region: in a memfd where one can be had, else anonymous (its
 * descendants' execs cannot be given it).  0, or -errno.
 */
static int region_create(struct region_ref *ref)
{
	struct region *r;
	struct stat st;
	int fd = region_memfd(sizeof(*r));

	if (fd >= 0 && fstat(fd, &st)) {
		real.close(fd);
		fd = -1;
	}
	r = fd < 0 ? MAP_FAILED
		   : mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (r == MAP_FAILED) {
		if (fd >= 0)
			real.close(fd);
		fd = -1;
		r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r == MAP_FAILED)
			return -ENOMEM;
	}
	r->magic = REGION_MAGIC;
	*ref = (struct region_ref){ .r = r, .fd = fd };
	if (fd >= 0) {
		r->dev = ref->dev = (uint64_t)st.st_dev;
		r->ino = ref->ino = (uint64_t)st.st_ino;
		ref->holder_pid = getpid();
	}
	return 0;
}

int share_start(void (*on_request)(void *ctx))
{
	struct region_ref ref;
	int ret = 0;

	pthread_mutex_lock(&sh.lock);
	if (sh.owner)
		goto out;
	ret = -ENOMEM;
	sh.ctx = calloc(SLOTS, sizeof(*sh.ctx));
	if (!sh.ctx)
		goto fail;
	ret = region_create(&ref);
	if (ret)
		goto fail;
	ret = open_request_socket_locked(ref.r);
	if (ret) {
		munmap(ref.r, sizeof(*ref.r));
		if (ref.fd >= 0)
			real.close(ref.fd);
		goto fail;
	}
	sh.on_request = on_request;
	sh.own = ref;
	sh.owner = true;
	goto out;
fail:
	free(sh.ctx);
	sh.ctx = NULL;
out:
	pthread_mutex_unlock(&sh.lock);
	return ret;
}

struct share_slot *share_slot_new(void *ctx)
{
	struct share_slot *slot = NULL;
	unsigned int i, k;

	pthread_mutex_lock(&sh.lock);
	for (k = 0; sh.owner && k < SLOTS; k++) {
		i = (sh.next + k) % SLOTS;
		if (sh.ctx[i])
			continue;
		sh.ctx[i] = ctx;
		sh.next = i + 1;
		if (sh.own.r->used <= i)
			__atomic_store_n(&sh.own.r->used, i + 1,
					 __ATOMIC_RELEASE);
		slot = &sh.own.r->slots[i];
		__atomic_store_n(&slot->request, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&slot->pending, SHARE_NOT_PENDING,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&slot->state, SHARE_RDMA, __ATOMIC_RELEASE);
		break;
	}
	pthread_mutex_unlock(&sh.lock);
	return slot;
}

void share_slot_free(struct share_slot *slot)
{
	/* A later connection from the same source must not find it. */
	__atomic_store_n(&slot->pending, SHARE_NOT_PENDING, __ATOMIC_RELEASE);
	pthread_mutex_lock(&sh.lock);
	if (sh.owner) {
		sh.ctx[slot - sh.own.r->slots] = NULL;
		/* Nobody is left to move it for a descendant that asks. */
		if (share_state(slot) < SHARE_TCP)
			share_publish(slot, SHARE_FAILED);
	}
	pthread_mutex_unlock(&sh.lock);
}

void share_publish(struct share_slot *slot, enum share_state state)
{
	__atomic_store_n(&slot->state, state, __ATOMIC_RELEASE);
	futex(&slot->state, FUTEX_WAKE, INT32_MAX, NULL);
}

enum share_state share_state(const struct share_slot *slot)
{
	return __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
}

/*
 * Sends r's owner a wake-up: 0, or -errno; -ECONNREFUSED (nothing is
 * bound to its name) or -EINVAL (no name) says the owner is gone.
 */
static int poke_owner(const struct region *r)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint32_t len;
	char one = 1;
	int fd, ret = 0;

	len = r ? __atomic_load_n(&r->name_len, __ATOMIC_RELAXED) : 0;
	if (len < 2 || len > NAME_MAX_LEN || r->name[0])
		return -EINVAL;
	memcpy(sun.sun_path, r->name, len);
	fd = real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (real.sendto(fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
			(struct sockaddr *)&sun,
			(socklen_t)(offsetof(struct sockaddr_un, sun_path) +
				    len)) != 1)
		ret = -errno;
	real.close(fd);
	return ret;
}

static bool owner_gone(int poked)
{
	return poked == -ECONNREFUSED || poked == -EINVAL;
}

/*
 * How often a descendant waiting for the owner's move checks that the
 * owner still lives: one that died mid-move publishes nothing.
 */
#define OWNER_CHECK_MS 1000

/*
 * Waits while *word is val, until deadline and at most OWNER_CHECK_MS:
 * 0, -ETIMEDOUT once the deadline has passed, or -EINTR when a signal
 * handler ran.
 */
static int wait_word(uint32_t *word, uint32_t val, int64_t deadline)
{
	struct timespec ts;
	int left = clock_ms_left(deadline);

	if (!left)
		return -ETIMEDOUT;
	if (left > OWNER_CHECK_MS)
		left = OWNER_CHECK_MS;
	ts.tv_sec = left / 1000;
	ts.tv_nsec = left % 1000 * 1000000l;
	if (futex(word, FUTEX_WAIT, val, &ts) && errno == EINTR)
		return -EINTR;
	return 0;
}

enum share_state share_request(struct share_slot *slot, int timeout_ms)
{
	int64_t deadline = clock_ms() + timeout_ms;
	enum share_state state = share_state(slot);
	int err;

	if (state >= SHARE_TCP)
		return state;
	__atomic_store_n(&slot->request, 1, __ATOMIC_RELEASE);
	/* A full queue still reaches it: it reads every slot's word. */
	if (owner_gone(poke_owner(sh.own.r)))
		goto gone;
	while ((state = share_state(slot)) < SHARE_TCP) {
		err = wait_word(&slot->state, state, deadline);
		if (err == -ETIMEDOUT)
			return SHARE_FAILED;
		state = share_state(slot);
		if (state >= SHARE_TCP)
			break;
		if (err == -EINTR)
			return state;
		if (owner_gone(poke_owner(sh.own.r)))
			goto gone;
	}
	return state;
gone:
	log_info("fork: the owner of an inherited RDMA connection is gone; "
		 "the connection is reset here");
	return SHARE_FAILED;
}

void share_pending_set(struct share_slot *slot,
		       const struct roceshim_stats_endpoint *source,
		       uint16_t port)
{
	slot->source = *source;
	slot->port = port;
	__atomic_store_n(&slot->expires_ms, clock_ms() + SHARE_HANDSHAKE_MS,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&slot->pending, SHARE_PENDING_WAIT, __ATOMIC_RELEASE);
}

void share_pending_settle(struct share_slot *slot, enum share_pending state)
{
	if (state == SHARE_PENDING_ESTABLISHED)
		__atomic_store_n(&slot->expires_ms,
				 clock_ms() + SHARE_PENDING_MS,
				 __ATOMIC_RELAXED);
	__atomic_store_n(&slot->pending, state, __ATOMIC_RELEASE);
	futex(&slot->pending, FUTEX_WAKE, INT32_MAX, NULL);
}

bool share_pending_take(struct share_slot *slot)
{
	uint32_t expect = SHARE_PENDING_ESTABLISHED;

	return __atomic_compare_exchange_n(&slot->pending, &expect,
					   SHARE_NOT_PENDING, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

enum share_pending share_pending_state(const struct share_slot *slot)
{
	return __atomic_load_n(&slot->pending, __ATOMIC_ACQUIRE);
}

/* r's pending slot for the connection from src to port, or NULL. */
static struct share_slot *
find_pending(struct region *r, const struct roceshim_stats_endpoint *src,
	     uint16_t port)
{
	int64_t now = clock_ms();
	unsigned int i;

	if (!r)
		return NULL;
	for (i = 0;
	     i < __atomic_load_n(&r->used, __ATOMIC_ACQUIRE) && i < SLOTS;
	     i++) {
		struct share_slot *s = &r->slots[i];
		enum share_pending state = share_pending_state(s);

		/* A claimed one is another accept()'s connection. */
		if (state != SHARE_NOT_PENDING &&
		    state != SHARE_PENDING_CLAIMED && s->port == port &&
		    endpoint_equal(&s->source, src) &&
		    __atomic_load_n(&s->expires_ms, __ATOMIC_RELAXED) > now)
			return s;
	}
	return NULL;
}

enum share_pending
share_pending_claim(const struct roceshim_stats_endpoint *src, uint16_t port,
		    int timeout_ms, bool *orphan)
{
	int64_t deadline = clock_ms() + timeout_ms;
	struct region *r = sh.own.r;
	struct share_slot *slot;
	unsigned int i, joined;
	uint32_t state;

	slot = find_pending(r, src, port);
	if (!slot) {
		r = sh.imported.r;
		slot = find_pending(r, src, port);
	}
	joined = __atomic_load_n(&sh.joined_count, __ATOMIC_ACQUIRE);
	for (i = 0; !slot && i < joined; i++) {
		r = sh.joined[i].r;
		slot = find_pending(r, src, port);
	}
	*orphan = false;
	if (!slot)
		return SHARE_NOT_PENDING;
	/* The client connects TCP once established: that may be in flight. */
	while ((state = share_pending_state(slot)) == SHARE_PENDING_WAIT)
		if (wait_word(&slot->pending, state, deadline) == -ETIMEDOUT)
			break;
	if (state != SHARE_PENDING_ESTABLISHED ||
	    !__atomic_compare_exchange_n(&slot->pending, &state,
					 SHARE_PENDING_CLAIMED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return state == SHARE_PENDING_FAILED ? state
						     : SHARE_NOT_PENDING;
	/* The owner drops its side; it need not answer. */
	__atomic_store_n(&slot->request, 1, __ATOMIC_RELEASE);
	*orphan = owner_gone(poke_owner(r));
	return SHARE_PENDING_CLAIMED;
}

/* Whether fd is ref's memfd (of any device where ref->dev is 0). */
static bool is_region_fd(const struct region_ref *ref, int fd)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	       (!ref->dev || (uint64_t)st.st_dev == ref->dev) &&
	       (uint64_t)st.st_ino == ref->ino;
}

/*
 * ref's memfd, opened anew through its holder's descriptor (Python's
 * subprocess closes every descriptor before its exec, this process's
 * copy too); -errno.  A ref->dev of 0 matches any device (a region named
 * by its holder's pid, descriptor and inode alone: share_join()).
 * Checked before it is opened, which only a regular file is (not a FIFO
 * or a device): a holder gone, and its pid reused, must not make this
 * open another file; and checked again on what was opened.
 */
static int reopen_region(const struct region_ref *ref)
{
	char path[64];
	struct stat st;
	int fd;

	if (ref->holder_pid <= 0 || ref->fd < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", ref->holder_pid,
		 ref->fd);
	if (stat(path, &st))
		return -errno;
	if (!S_ISREG(st.st_mode) ||
	    (ref->dev && (uint64_t)st.st_dev != ref->dev) ||
	    (uint64_t)st.st_ino != ref->ino)
		return -ENOENT;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (!is_region_fd(ref, fd)) {
		real.close(fd);
		return -ENOENT;
	}
	return fd;
}

/*
 * A close-on-exec copy of ref's memfd, hidden where it can be, never one
 * of the standard descriptors (the new program would read or write it as
 * such); -errno.
 */
static int export_copy(const struct region_ref *ref)
{
	int fd = ref->fd, opened = -1, copy;

	if (!ref->r || ref->fd < 0)
		return -EOPNOTSUPP;
	if (!is_region_fd(ref, fd)) {
		opened = reopen_region(ref);
		if (opened < 0)
			return opened;
		fd = opened;
	}
	copy = fd_room_dup(fd);
	if (opened >= 0)
		real.close(opened);
	if (copy >= 0 && copy <= STDERR_FILENO) {
		real.close(copy);
		copy = -EMFILE;
	}
	return copy;
}

char *share_export(bool imported)
{
	const struct region_ref *ref = imported ? &sh.imported : &sh.own;
	int err = errno, fd;
	char *var = NULL;

	fd = export_copy(ref);
	if (fd < 0) {
		log_warn("exec: cannot hand the RDMA connections of a kept "
			 "listener to the new program (%s)",
			 strerror(-fd));
		goto out;
	}
	if (asprintf(&var, SHARE_ENV "=%d", fd) < 0) {
		real.close(fd);
		var = NULL;
		goto out;
	}
	exported_fd = fd;
	__atomic_store_n(&exported, true, __ATOMIC_RELEASE);
out:
	errno = err;
	return var;
}

bool share_exported(void)
{
	return __atomic_load_n(&exported, __ATOMIC_ACQUIRE);
}

void share_export_inherit(void)
{
	int err = errno;

	if (exported_fd >= 0)
		real.fcntl(exported_fd, F_SETFD, 0);
	errno = err;
}

void share_export_close(void)
{
	int err = errno;

	if (exported_fd >= 0)
		real.close(exported_fd);
	exported_fd = -1;
	errno = err;
}

/* Whether fd, named by the environment, is a region's memfd. */
static bool names_region(int fd)
{
	static const char prefix[] = "/memfd:" MEMFD_NAME " ";
	char path[64], target[sizeof(prefix)];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	len = readlink(path, target, sizeof(target));
	return len == (ssize_t)sizeof(target) &&
	       !memcmp(target, prefix, sizeof(target) - 1);
}

/*
 * Maps fd's region if it is one of this layout, sealed at its size:
 * false if not.
 */
static bool map_region(int fd, struct region_ref *ref)
{
	const int seals = F_SEAL_SHRINK | F_SEAL_GROW;
	struct region *r;
	struct stat st;
	int have;

	if (fstat(fd, &st) || (uint64_t)st.st_size != sizeof(*r))
		return false;
	have = real.fcntl(fd, F_GET_SEALS);
	if (have < 0 || (have & seals) != seals)
		return false;
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (r == MAP_FAILED)
		return false;
	if (__atomic_load_n(&r->magic, __ATOMIC_RELAXED) != REGION_MAGIC ||
	    r->dev != (uint64_t)st.st_dev || r->ino != (uint64_t)st.st_ino) {
		munmap(r, sizeof(*r));
		return false;
	}
	*ref = (struct region_ref){ .r = r,
				    .dev = (uint64_t)st.st_dev,
				    .ino = (uint64_t)st.st_ino };
	return true;
}

void share_import(void)
{
	const char *value = getenv(SHARE_ENV);
	struct region_ref ref;
	bool valid;
	char *end;
	long fd;

	if (!value)
		return;
	/* A set-uid program takes no descriptor from its user. */
	if (!secure_getenv(SHARE_ENV)) {
		unsetenv(SHARE_ENV);
		return;
	}
	errno = 0;
	fd = strtol(value, &end, 10);
	valid = !errno && end != value && !*end && fd > STDERR_FILENO &&
		fd <= INT32_MAX;
	unsetenv(SHARE_ENV);
	if (!valid || !names_region((int)fd))
		return;
	real_init();
	if (!map_region((int)fd, &ref)) {
		log_warn("exec: the RDMA connections handed over are of "
			 "another roceshim version; they stay with their "
			 "owner");
		real.close((int)fd);
		return;
	}
	/* The exec made the copy for this image: it is ours to keep. */
	ref.fd = fd_room_keep((int)fd);
	real.fcntl(ref.fd, F_SETFD, FD_CLOEXEC);
	ref.holder_pid = getpid();
	sh.imported = ref;
}

bool share_imported(void)
{
	return sh.imported.r;
}

int share_region_fd(uint64_t *ino)
{
	int fd;

	pthread_mutex_lock(&sh.lock);
	fd = sh.owner && sh.own.r && sh.own.fd >= 0 ? sh.own.fd : -ENOENT;
	*ino = sh.own.ino;
	pthread_mutex_unlock(&sh.lock);
	return fd;
}

/* Whether ref is a region this process maps already: that one, or NULL. */
static struct region *mapped_locked(const struct region_ref *ref)
{
	unsigned int i;

	if (sh.own.r && sh.own.dev == ref->dev && sh.own.ino == ref->ino)
		return sh.own.r;
	if (sh.imported.r && sh.imported.dev == ref->dev &&
	    sh.imported.ino == ref->ino)
		return sh.imported.r;
	for (i = 0; i < sh.joined_count; i++)
		if (sh.joined[i].dev == ref->dev &&
		    sh.joined[i].ino == ref->ino)
			return sh.joined[i].r;
	return NULL;
}

/* Lists listener in r's joined listeners; false if they are all taken. */
static bool add_listener(struct region *r, uint64_t listener)
{
	unsigned int i;

	for (i = 0; i < SHARE_LISTENERS_MAX; i++) {
		uint64_t seen = 0;

		/* A free entry taken, or one that lists it already. */
		if (__atomic_compare_exchange_n(
			    &r->listeners[i], &seen, listener, false,
			    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
		    seen == listener)
			return true;
	}
	return false;
}

/*
 * Maps the region of process pid's descriptor fd if it is the memfd of
 * inode ino, a roceshim region of this layout; under sh.lock.  The
 * region, or NULL.
 */
static struct region *join_locked(int pid, int fd, uint64_t ino)
{
	struct region_ref ref = { .holder_pid = pid, .fd = fd, .ino = ino };
	struct region *r = NULL;
	struct stat st;
	int opened;

	fd_room_enter();
	opened = reopen_region(&ref);
	fd_room_leave();
	if (opened < 0)
		return NULL;
	if (!fstat(opened, &st)) {
		ref.dev = (uint64_t)st.st_dev;
		r = mapped_locked(&ref);
	}
	if (!r && ref.dev && sh.joined_count < SHARE_JOINED_MAX &&
	    names_region(opened) && map_region(opened, &ref)) {
		ref.fd = -1;
		r = ref.r;
		sh.joined[sh.joined_count] = ref;
		__atomic_store_n(&sh.joined_count, sh.joined_count + 1,
				 __ATOMIC_RELEASE);
	}
	real.close(opened);
	return r;
}

int share_join(int pid, int fd, uint64_t ino, uint64_t listener)
{
	int err = errno, ret = -ENOENT;
	struct region *r;

	if (pid <= 0 || fd < 0 || !ino)
		return -EINVAL;
	pthread_mutex_lock(&sh.lock);
	/* This process's own, or, in another pid namespace, another's. */
	if (sh.own.r && sh.own.fd >= 0 && sh.own.ino == ino && pid == getpid())
		r = sh.own.r;
	else
		r = join_locked(pid, fd, ino);
	if (r && !add_listener(r, listener))
		ret = -ENOSPC;
	else if (r)
		ret = sh.owner && r == sh.own.r;
	pthread_mutex_unlock(&sh.lock);
	errno = err;
	return ret;
}

bool share_listener_joined(uint64_t listener)
{
	unsigned int i;

	if (!sh.own.r)
		return false;
	for (i = 0; i < SHARE_LISTENERS_MAX; i++)
		if (__atomic_load_n(&sh.own.r->listeners[i],
				    __ATOMIC_ACQUIRE) == listener)
			return true;
	return false;
}

void FORK_CODE share_fork_child(bool fds_shared)
{
	/*
	 * The region stays mapped: this process's inherited connections, and
	 * the listeners' pending ones, are in it.  It is its owner's, not
	 * this process's, to hand out and serve.
	 */
	pthread_mutex_init(&sh.lock, NULL);
	sh.owner = false;
	/*
	 * Left to the process's end, not freed: a fork handler must not call
	 * the allocator.  One the program brings (jemalloc in redis) may
	 * register its own child handler after this one, which then runs
	 * first, while that allocator's locks are still held.
	 */
	sh.ctx = NULL;
	if (sh.sock >= 0 && !fds_shared)
		real.close(sh.sock);
	sh.sock = -1;
}
