// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/epoll.h>

#include "cq_hub.h"
#include "fd_room.h"
#include "fork_page.h"
#include "progress.h"
#include "rdma_stack.h"
#include "real.h"

struct cq_hub {
	/* Under table.lock; ch also atomic, for drains by slot: */
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch; /* NULL: a free slot */
	unsigned int users;	     /* completion queues on it */
	unsigned int watchers;	     /* cq_hub_watch() on, not off */
	bool retired;		     /* takes no new queue */
	/* Serialises its drains and cq_hub_lock(). */
	pthread_mutex_t drain_lock;
	/* The progress thread's watch, and what its drains serve with. */
	struct progress_watcher watcher;
	cq_hub_serve_fn watch_serve;
	void *watch_arg;
} __attribute__((aligned(64))); /* drain locks on lines of their own */

static void watch_fired(struct progress_watcher *w, uint32_t events);

#define HUB_INIT                                                   \
	((struct cq_hub){ .drain_lock = PTHREAD_MUTEX_INITIALIZER, \
			  .watcher = { .fn = watch_fired } })

static struct cq_hub slots[CQ_HUB_SLOTS] = {
	[0 ... CQ_HUB_SLOTS - 1] = HUB_INIT,
};

/*
 * table.lock guards the slots.  A drain holds its hub's drain_lock, and
 * its serve functions may call cq_hub_watch(), which takes table.lock;
 * nothing takes a drain_lock while it holds table.lock.  made: a hub was
 * made, or is being made; a fork child of a process that made none has
 * no slot to reset, and touches none of the table's pages.
 */
static struct {
	pthread_mutex_t lock;
	bool made;
} table FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A new channel for ctx, non-blocking, out of the program's way. */
static struct ibv_comp_channel *make_channel(struct ibv_context *ctx, int *err)
{
	struct ibv_comp_channel *ch;
	int fd, flags;

	fd_room_enter();
	ch = ibv.create_comp_channel(ctx);
	*err = ch ? 0 : -(errno ? errno : ENOMEM);
	fd = ch ? fd_room_hide(ch->fd) : -1;
	fd_room_leave();
	if (!ch)
		return NULL;
	if (fd < 0) {
		*err = fd;
		goto fail;
	}
	/* Before any queue names it: the kernel finds it by number. */
	ch->fd = fd;
	/* Non-blocking: every waiter on it drains, and they race. */
	flags = real.fcntl(fd, F_GETFL);
	if (flags < 0 || real.fcntl(fd, F_SETFL, flags | O_NONBLOCK)) {
		*err = -errno;
		goto fail;
	}
	return ch;
fail:
	ibv.destroy_comp_channel(ch);
	return NULL;
}

/*
 * Under table.lock: the hub of ctx with the fewest queues (NULL: none),
 * and in *free_slot where to make another if ctx should have one (NULL:
 * it should not, or there is no room).
 */
static struct cq_hub *pick_locked(struct ibv_context *ctx,
				  struct cq_hub **free_slot)
{
	struct cq_hub *least = NULL;
	unsigned int i, count = 0;

	*free_slot = NULL;
	for (i = 0; i < CQ_HUB_SLOTS; i++) {
		struct cq_hub *s = &slots[i];

		if (!s->ch) {
			if (!*free_slot)
				*free_slot = s;
			continue;
		}
		if (s->ctx != ctx || s->retired)
			continue;
		count++;
		if (!least || s->users < least->users)
			least = s;
	}
	if (count == CQ_HUB_PER_DEVICE)
		*free_slot = NULL;
	return least;
}

struct cq_hub *cq_hub_get(struct ibv_context *ctx, int *err)
{
	struct cq_hub *free_slot, *h;
	struct ibv_comp_channel *ch;

	*err = 0;
	pthread_mutex_lock(&table.lock);
	h = pick_locked(ctx, &free_slot);
	if (free_slot) {
		__atomic_store_n(&table.made, true, __ATOMIC_RELAXED);
		ch = make_channel(ctx, err);
		if (ch) {
			h = free_slot;
			h->ctx = ctx;
			h->users = h->watchers = 0;
			h->retired = false;
			__atomic_store_n(&h->ch, ch, __ATOMIC_RELEASE);
		}
	}
	/* Out of descriptors, say: a hub the device has will do. */
	if (h) {
		*err = 0;
		h->users++;
	} else if (!*err) {
		*err = -ENOSPC;
	}
	pthread_mutex_unlock(&table.lock);
	return h;
}

void cq_hub_put(struct cq_hub *h)
{
	struct ibv_comp_channel *ch = h->ch;
	bool last;

	pthread_mutex_lock(&table.lock);
	last = !--h->users;
	if (last) {
		if (h->watchers)
			progress_del(ch->fd);
		__atomic_store_n(&h->ch, NULL, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&table.lock);
	if (!last)
		return;
	/* Out of the slot: a drain that found it there is over after this. */
	pthread_mutex_lock(&h->drain_lock);
	pthread_mutex_unlock(&h->drain_lock);
	ibv.destroy_comp_channel(ch);
}

void cq_hub_retire(struct cq_hub *h)
{
	pthread_mutex_lock(&table.lock);
	h->retired = true;
	pthread_mutex_unlock(&table.lock);
}

struct ibv_comp_channel *cq_hub_channel(const struct cq_hub *h)
{
	return h->ch;
}

int cq_hub_fd(const struct cq_hub *h)
{
	const struct ibv_comp_channel *ch = h->ch;

	return ch ? ch->fd : -1;
}

unsigned int cq_hub_slot(const struct cq_hub *h)
{
	return (unsigned int)(h - slots);
}

unsigned int cq_hub_drain(unsigned int slot, cq_hub_serve_fn serve, void *arg,
			  unsigned int max)
{
	struct ibv_comp_channel *ch;
	struct cq_hub *h;
	unsigned int n = 0;
	struct ibv_cq *cq;
	int saved = errno;
	void *ctx;

	if (slot >= CQ_HUB_SLOTS)
		return 0;
	h = &slots[slot];
	pthread_mutex_lock(&h->drain_lock);
	ch = __atomic_load_n(&h->ch, __ATOMIC_ACQUIRE);
	while (ch && (!max || n < max) && !ibv.get_cq_event(ch, &cq, &ctx)) {
		serve(ctx, arg);
		ibv.ack_cq_events(cq, 1);
		n++;
	}
	pthread_mutex_unlock(&h->drain_lock);
	/* The last get_cq_event() said EAGAIN. */
	errno = saved;
	return n;
}

void cq_hub_lock(struct cq_hub *h)
{
	pthread_mutex_lock(&h->drain_lock);
}

void cq_hub_unlock(struct cq_hub *h)
{
	pthread_mutex_unlock(&h->drain_lock);
}

static void watch_fired(struct progress_watcher *w, uint32_t events)
{
	struct cq_hub *h =
		(struct cq_hub *)((char *)w - offsetof(struct cq_hub, watcher));

	(void)events;
	if (h->watch_serve)
		cq_hub_drain(cq_hub_slot(h), h->watch_serve, h->watch_arg, 0);
}

void cq_hub_watch(struct cq_hub *h, bool on, cq_hub_serve_fn serve, void *arg)
{
	pthread_mutex_lock(&table.lock);
	if (on && !h->watchers++) {
		h->watch_serve = serve;
		h->watch_arg = arg;
		progress_add(h->ch->fd, EPOLLIN, &h->watcher);
	} else if (!on && h->watchers && !--h->watchers) {
		progress_del(h->ch->fd);
	}
	pthread_mutex_unlock(&table.lock);
}

/*
 * The parent's channels stay open here, unused: its queues are on them,
 * and a set shared with the parent may hold them.
 */
void FORK_CODE cq_hub_fork_child(void)
{
	unsigned int i;

	pthread_mutex_init(&table.lock, NULL);
	if (!__atomic_load_n(&table.made, __ATOMIC_RELAXED))
		return;
	table.made = false;
	for (i = 0; i < CQ_HUB_SLOTS; i++)
		slots[i] = HUB_INIT;
}
