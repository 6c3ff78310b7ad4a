// SPDX-License-Identifier: MIT
/*
 * Entries live in one array, where a removed one waits on a free list for
 * the next addition, so that an entry's index names it for good.  Three
 * hash tables of chains through those indices find an entry by its key,
 * its data and its owner.  Each table has as many buckets as there are
 * entries, rounded up to a power of two: a chain holds one entry on
 * average.
 */
#include <stdlib.h>
#include <string.h>

#include "epoll_registry.h"

#define BUCKETS_MIN 16u
#define GOLDEN	    UINT64_C(0x9e3779b97f4a7c15)

enum chain {
	BY_KEY,
	BY_DATA,
	BY_OWNER
};

static unsigned int spread(const struct epoll_registry *g, uint64_t x)
{
	return (unsigned int)((x * GOLDEN) >> 32) & g->mask;
}

const void *epoll_registry_owner(const struct epoll_reg *o)
{
	return o->r ? (const void *)o->r : (const void *)o->pending;
}

static unsigned int key_bucket(const struct epoll_registry *g, int epfd, int fd)
{
	return spread(g, (uint64_t)(uint32_t)epfd << 32 | (uint32_t)fd);
}

static unsigned int data_bucket(const struct epoll_registry *g, int epfd,
				uint64_t data)
{
	return spread(
		g, data ^ ((uint64_t)(uint32_t)epfd * 0xff51afd7ed558ccdull));
}

static unsigned int owner_bucket(const struct epoll_registry *g,
				 const void *owner)
{
	return spread(g, (uint64_t)(uintptr_t)owner);
}

static unsigned int *link_of(struct epoll_reg *o, enum chain c)
{
	if (c == BY_KEY)
		return &o->next_key;
	return c == BY_DATA ? &o->next_data : &o->next_owner;
}

static unsigned int *head_of(struct epoll_registry *g,
			     const struct epoll_reg *o, enum chain c)
{
	if (c == BY_KEY)
		return &g->by_key[key_bucket(g, o->epfd, o->fd)];
	if (c == BY_DATA)
		return &g->by_data[data_bucket(g, o->epfd, o->data)];
	return &g->by_owner[owner_bucket(g, epoll_registry_owner(o))];
}

static void link_in(struct epoll_registry *g, struct epoll_reg *o, enum chain c)
{
	unsigned int *head = head_of(g, o, c);

	*link_of(o, c) = *head;
	*head = (unsigned int)(o - g->v) + 1;
}

static void link_out(struct epoll_registry *g, struct epoll_reg *o,
		     enum chain c)
{
	unsigned int *at = head_of(g, o, c);
	unsigned int me = (unsigned int)(o - g->v) + 1;

	while (*at && *at != me)
		at = link_of(&g->v[*at - 1], c);
	if (*at)
		*at = *link_of(o, c);
}

static bool in_use(const struct epoll_reg *o)
{
	return o->fd >= 0;
}

/* Rebuilds the chains over buckets buckets; false: out of memory. */
static bool rehash(struct epoll_registry *g, unsigned int buckets)
{
	unsigned int *key = calloc(buckets, sizeof(*key));
	unsigned int *data = calloc(buckets, sizeof(*data));
	unsigned int *owner = calloc(buckets, sizeof(*owner));
	unsigned int i;

	if (!key || !data || !owner) {
		free(key);
		free(data);
		free(owner);
		return false;
	}
	free(g->by_key);
	free(g->by_data);
	free(g->by_owner);
	g->by_key = key;
	g->by_data = data;
	g->by_owner = owner;
	g->mask = buckets - 1;
	for (i = 0; i < g->used; i++) {
		if (!in_use(&g->v[i]))
			continue;
		link_in(g, &g->v[i], BY_KEY);
		link_in(g, &g->v[i], BY_DATA);
		link_in(g, &g->v[i], BY_OWNER);
	}
	return true;
}

struct epoll_reg *epoll_registry_find(const struct epoll_registry *g, int epfd,
				      int fd, const void *owner)
{
	struct epoll_reg *o;
	unsigned int i;

	if (!g->by_key || fd < 0)
		return NULL;
	for (i = g->by_key[key_bucket(g, epfd, fd)]; i; i = o->next_key) {
		o = &g->v[i - 1];
		if (o->epfd == epfd && o->fd == fd &&
		    epoll_registry_owner(o) == owner)
			return o;
	}
	return NULL;
}

/* A free entry's index, or g->used grown by one; -1: out of memory. */
static int take_slot(struct epoll_registry *g)
{
	unsigned int i = g->free_head;

	if (i) {
		g->free_head = g->v[i - 1].next_key;
		return (int)i - 1;
	}
	if (g->used == g->cap) {
		unsigned int cap = g->cap ? 2 * g->cap : BUCKETS_MIN;
		struct epoll_reg *v = realloc(g->v, cap * sizeof(*v));

		if (!v)
			return -1;
		g->v = v;
		g->cap = cap;
	}
	return (int)g->used++;
}

struct epoll_reg *epoll_registry_add(struct epoll_registry *g,
				     const struct epoll_reg *val)
{
	unsigned int buckets = g->by_key ? g->mask + 1 : 0;
	struct epoll_reg *o;
	int i;

	/* Grown before the entry is taken: a failure leaves nothing half done.
	 */
	if (g->live + 1 > buckets &&
	    !rehash(g, buckets ? 2 * buckets : BUCKETS_MIN) && !buckets)
		return NULL;
	i = take_slot(g);
	if (i < 0)
		return NULL;
	o = &g->v[i];
	*o = *val;
	link_in(g, o, BY_KEY);
	link_in(g, o, BY_DATA);
	link_in(g, o, BY_OWNER);
	g->live++;
	return o;
}

void epoll_registry_update(struct epoll_registry *g, struct epoll_reg *o,
			   const struct epoll_reg *val)
{
	link_out(g, o, BY_DATA);
	link_out(g, o, BY_OWNER);
	o->r = val->r;
	o->pending = val->pending;
	o->data = val->data;
	o->events = val->events;
	o->disarmed = val->disarmed;
	o->fd_gone = val->fd_gone;
	o->via = val->via;
	link_in(g, o, BY_DATA);
	link_in(g, o, BY_OWNER);
}

void epoll_registry_remove(struct epoll_registry *g, struct epoll_reg *o)
{
	link_out(g, o, BY_KEY);
	link_out(g, o, BY_DATA);
	link_out(g, o, BY_OWNER);
	memset(o, 0, sizeof(*o));
	o->epfd = o->fd = -1;
	o->next_key = g->free_head;
	g->free_head = (unsigned int)(o - g->v) + 1;
	g->live--;
}

struct epoll_reg *epoll_registry_next_owned(const struct epoll_registry *g,
					    const void *owner,
					    const struct epoll_reg *after)
{
	unsigned int i;

	if (!g->by_owner)
		return NULL;
	i = after ? after->next_owner : g->by_owner[owner_bucket(g, owner)];
	for (; i; i = g->v[i - 1].next_owner)
		if (epoll_registry_owner(&g->v[i - 1]) == owner)
			return &g->v[i - 1];
	return NULL;
}

struct epoll_reg *epoll_registry_next_with(const struct epoll_registry *g,
					   int epfd, uint64_t data,
					   const struct epoll_reg *after)
{
	unsigned int i;

	if (!g->by_data)
		return NULL;
	i = after ? after->next_data : g->by_data[data_bucket(g, epfd, data)];
	for (; i; i = g->v[i - 1].next_data)
		if (g->v[i - 1].epfd == epfd && g->v[i - 1].data == data)
			return &g->v[i - 1];
	return NULL;
}

struct epoll_reg *epoll_registry_next(const struct epoll_registry *g,
				      const struct epoll_reg *after)
{
	unsigned int i = after ? (unsigned int)(after - g->v) + 1 : 0;

	for (; i < g->used; i++)
		if (in_use(&g->v[i]))
			return &g->v[i];
	return NULL;
}

unsigned int epoll_registry_count_owned(const struct epoll_registry *g,
					const void *owner)
{
	const struct epoll_reg *o = NULL;
	unsigned int n = 0;

	while ((o = epoll_registry_next_owned(g, owner, o)))
		n++;
	return n;
}

void epoll_registry_clear(struct epoll_registry *g)
{
	free(g->v);
	free(g->by_key);
	free(g->by_data);
	free(g->by_owner);
	memset(g, 0, sizeof(*g));
}
