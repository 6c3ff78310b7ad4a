// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>

#include "cq_hub.h"
#include "fd_room.h"
#include "fork_page.h"
#include "rdma_stack.h"
#include "real.h"

/* Devices a process uses at once; beyond, a connection stays on TCP. */
#define CQ_HUB_MAX 8

struct cq_hub {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch; /* NULL: a free slot */
	unsigned int users;	     /* completion queues on it */
	unsigned int watchers;	     /* cq_hub_watch() on, not off */
	bool retired;		     /* takes no new queue */
};

/*
 * drain_lock serialises drains and cq_hub_lock(); table_lock the slots.
 * A drain takes table_lock inside drain_lock (to copy the channels out),
 * and its serve functions may call cq_hub_watch(); nothing takes
 * drain_lock while it holds table_lock.
 */
static struct {
	pthread_mutex_t drain_lock;
	pthread_mutex_t table_lock;
	struct cq_hub v[CQ_HUB_MAX];
} hubs FORK_DATA = {
	.drain_lock = PTHREAD_MUTEX_INITIALIZER,
	.table_lock = PTHREAD_MUTEX_INITIALIZER,
};

static struct cq_hub *find_locked(const struct ibv_comp_channel *ch)
{
	unsigned int i;

	for (i = 0; i < CQ_HUB_MAX; i++)
		if (hubs.v[i].ch && hubs.v[i].ch == ch)
			return &hubs.v[i];
	return NULL;
}

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

struct ibv_comp_channel *cq_hub_get(struct ibv_context *ctx, int *err)
{
	struct cq_hub *free_slot = NULL, *h = NULL;
	unsigned int i;

	*err = 0;
	pthread_mutex_lock(&hubs.table_lock);
	for (i = 0; i < CQ_HUB_MAX && !h; i++) {
		struct cq_hub *s = &hubs.v[i];

		if (s->ch && s->ctx == ctx && !s->retired)
			h = s;
		else if (!s->ch && !free_slot)
			free_slot = s;
	}
	if (!h && !free_slot)
		*err = -ENOSPC;
	if (!h && free_slot) {
		free_slot->ch = make_channel(ctx, err);
		if (free_slot->ch) {
			h = free_slot;
			h->ctx = ctx;
			h->users = h->watchers = 0;
			h->retired = false;
		}
	}
	if (h)
		h->users++;
	pthread_mutex_unlock(&hubs.table_lock);
	return h ? h->ch : NULL;
}

void cq_hub_put(struct ibv_comp_channel *ch)
{
	struct cq_hub *h;
	bool last;

	pthread_mutex_lock(&hubs.table_lock);
	h = find_locked(ch);
	last = h && !--h->users;
	if (last) {
		if (h->watchers)
			progress_del(ch->fd);
		h->ch = NULL;
	}
	pthread_mutex_unlock(&hubs.table_lock);
	if (!last)
		return;
	/* Out of the table: a drain that copied it out is over after this. */
	pthread_mutex_lock(&hubs.drain_lock);
	pthread_mutex_unlock(&hubs.drain_lock);
	ibv.destroy_comp_channel(ch);
}

void cq_hub_retire(struct ibv_comp_channel *ch)
{
	struct cq_hub *h;

	pthread_mutex_lock(&hubs.table_lock);
	h = find_locked(ch);
	if (h)
		h->retired = true;
	pthread_mutex_unlock(&hubs.table_lock);
}

static unsigned int drain_one(struct ibv_comp_channel *ch,
			      cq_hub_serve_fn serve, void *arg,
			      unsigned int max)
{
	unsigned int n = 0;
	struct ibv_cq *cq;
	void *ctx;

	while ((!max || n < max) && !ibv.get_cq_event(ch, &cq, &ctx)) {
		serve(ctx, arg);
		ibv.ack_cq_events(cq, 1);
		n++;
	}
	return n;
}

unsigned int cq_hub_drain(cq_hub_serve_fn serve, void *arg, unsigned int max)
{
	struct ibv_comp_channel *live[CQ_HUB_MAX];
	unsigned int i, count = 0, n = 0;
	int saved = errno;

	pthread_mutex_lock(&hubs.drain_lock);
	pthread_mutex_lock(&hubs.table_lock);
	for (i = 0; i < CQ_HUB_MAX; i++)
		if (hubs.v[i].ch)
			live[count++] = hubs.v[i].ch;
	pthread_mutex_unlock(&hubs.table_lock);
	for (i = 0; i < count && (!max || n < max); i++)
		n += drain_one(live[i], serve, arg, max ? max - n : 0);
	pthread_mutex_unlock(&hubs.drain_lock);
	/* The last get_cq_event() said EAGAIN. */
	errno = saved;
	return n;
}

void cq_hub_lock(void)
{
	pthread_mutex_lock(&hubs.drain_lock);
}

void cq_hub_unlock(void)
{
	pthread_mutex_unlock(&hubs.drain_lock);
}

void cq_hub_watch(struct ibv_comp_channel *ch, bool on,
		  struct progress_watcher *w)
{
	struct cq_hub *h;

	pthread_mutex_lock(&hubs.table_lock);
	h = find_locked(ch);
	if (h && on && !h->watchers++)
		progress_add(ch->fd, EPOLLIN, w);
	else if (h && !on && h->watchers && !--h->watchers)
		progress_del(ch->fd);
	pthread_mutex_unlock(&hubs.table_lock);
}

/*
 * The parent's channels stay open here, unused: its queues are on them,
 * and a set shared with the parent may hold them.
 */
void FORK_CODE cq_hub_fork_child(void)
{
	pthread_mutex_init(&hubs.drain_lock, NULL);
	pthread_mutex_init(&hubs.table_lock, NULL);
	memset(hubs.v, 0, sizeof(hubs.v));
}
