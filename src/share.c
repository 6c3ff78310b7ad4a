// SPDX-License-Identifier: MIT
#include <errno.h>
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
#include <sys/socket.h>
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
 * slots are used.
 */
#define SLOTS	     16384
#define NAME_MAX_LEN 64

struct share_slot {
	uint32_t state;	  /* atomic: enum share_state; a futex word */
	uint32_t request; /* atomic: a descendant asks */
	uint32_t pending; /* atomic: enum share_pending; a futex word */
	uint16_t port;	  /* pending: the listener's port */
	uint16_t pad;
	struct roceshim_stats_endpoint source; /* pending: the TCP source */
	uint8_t reserved[64 - 16 - sizeof(struct roceshim_stats_endpoint)];
};

struct region {
	/* The owner's request socket: an abstract unix name, NUL first. */
	char name[NAME_MAX_LEN];
	uint32_t name_len;
	uint32_t used; /* atomic: no slot at or above was ever used */
	uint8_t pad[56];
	struct share_slot slots[SLOTS];
};

static struct {
	pthread_mutex_t lock;
	struct region *region; /* the owner's, or an inherited one */
	bool owner;	       /* region is ours to hand out and serve */
	void **ctx;	       /* owner only: per slot, NULL while free */
	unsigned int next;     /* where the search for a free slot starts */
	unsigned int used;     /* owner: no slot at or above was used */
	int sock;	       /* the request socket; -1 */
	struct progress_watcher watcher;
	void (*on_request)(void *ctx);
} sh FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER, .sock = -1 };

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
	for (i = 0; i < __atomic_load_n(&sh.region->used, __ATOMIC_ACQUIRE);
	     i++) {
		pthread_mutex_lock(&sh.lock);
		ctx = sh.ctx[i];
		if (ctx && !__atomic_exchange_n(&sh.region->slots[i].request, 0,
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

int share_start(void (*on_request)(void *ctx))
{
	struct region *r;
	int ret = 0;

	pthread_mutex_lock(&sh.lock);
	if (sh.owner)
		goto out;
	ret = -ENOMEM;
	sh.ctx = calloc(SLOTS, sizeof(*sh.ctx));
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (!sh.ctx || r == MAP_FAILED)
		goto fail;
	ret = open_request_socket_locked(r);
	if (ret) {
		munmap(r, sizeof(*r));
		goto fail;
	}
	sh.on_request = on_request;
	sh.region = r;
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
		if (sh.region->used <= i)
			__atomic_store_n(&sh.region->used, i + 1,
					 __ATOMIC_RELEASE);
		slot = &sh.region->slots[i];
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
	pthread_mutex_lock(&sh.lock);
	if (sh.owner)
		sh.ctx[slot - sh.region->slots] = NULL;
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

/* Sends the owner a wake-up; false if it cannot be reached (gone). */
static bool poke_owner(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const struct region *r = sh.region;
	char one = 1;
	bool ok;
	int fd;

	if (!r || r->name_len < 2 || r->name_len > NAME_MAX_LEN || r->name[0])
		return false;
	memcpy(sun.sun_path, r->name, r->name_len);
	fd = real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ok = real.sendto(fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
			 (struct sockaddr *)&sun,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
				     r->name_len)) == 1;
	real.close(fd);
	return ok;
}

/* Waits while *word is val, until deadline; false once it has passed. */
static bool wait_word(uint32_t *word, uint32_t val, int64_t deadline)
{
	struct timespec ts;
	int left = clock_ms_left(deadline);

	if (!left)
		return false;
	ts.tv_sec = left / 1000;
	ts.tv_nsec = left % 1000 * 1000000l;
	futex(word, FUTEX_WAIT, val, &ts);
	return true;
}

enum share_state share_request(struct share_slot *slot, int timeout_ms)
{
	int64_t deadline = clock_ms() + timeout_ms;
	enum share_state state = share_state(slot);

	if (state >= SHARE_TCP)
		return state;
	__atomic_store_n(&slot->request, 1, __ATOMIC_RELEASE);
	if (!poke_owner()) {
		log_info("fork: the owner of an inherited RDMA connection is "
			 "gone; the connection is reset here");
		return SHARE_FAILED;
	}
	while ((state = share_state(slot)) < SHARE_TCP)
		if (!wait_word(&slot->state, state, deadline))
			return SHARE_FAILED;
	return state;
}

void share_pending_set(struct share_slot *slot,
		       const struct roceshim_stats_endpoint *source,
		       uint16_t port)
{
	slot->source = *source;
	slot->port = port;
	__atomic_store_n(&slot->pending, SHARE_PENDING_WAIT, __ATOMIC_RELEASE);
}

void share_pending_settle(struct share_slot *slot, enum share_pending state)
{
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

enum share_pending
share_pending_claim(const struct roceshim_stats_endpoint *src, uint16_t port,
		    int timeout_ms)
{
	int64_t deadline = clock_ms() + timeout_ms;
	struct share_slot *slot = NULL;
	uint32_t state;
	unsigned int i;

	if (!sh.region)
		return SHARE_NOT_PENDING;
	for (i = 0; i < __atomic_load_n(&sh.region->used, __ATOMIC_ACQUIRE) &&
		    i < SLOTS && !slot;
	     i++) {
		struct share_slot *s = &sh.region->slots[i];

		if (share_pending_state(s) != SHARE_NOT_PENDING &&
		    s->port == port && endpoint_equal(&s->source, src))
			slot = s;
	}
	if (!slot)
		return SHARE_NOT_PENDING;
	/* The client connects TCP once established: that may be in flight. */
	while ((state = share_pending_state(slot)) == SHARE_PENDING_WAIT)
		if (!wait_word(&slot->pending, state, deadline))
			break;
	if (state != SHARE_PENDING_ESTABLISHED ||
	    !__atomic_compare_exchange_n(&slot->pending, &state,
					 SHARE_PENDING_CLAIMED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return state;
	/* The owner drops its side; it need not answer. */
	__atomic_store_n(&slot->request, 1, __ATOMIC_RELEASE);
	poke_owner();
	return SHARE_PENDING_CLAIMED;
}

void FORK_CODE share_fork_child(void)
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
	if (sh.sock >= 0)
		real.close(sh.sock);
	sh.sock = -1;
}
