// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reg_cache.h"
#include "stats.h"

struct reg_entry {
	void *mr;		      /* NULL: the slot is free */
	uintptr_t lo, hi;	      /* the pages registered */
	uintptr_t alloc_lo, alloc_hi; /* the allocation, as the caller said */
	uint64_t id;		      /* the allocation's buffer id */
	uint64_t used;		      /* the cache's clock when last got */
	unsigned int refs;	      /* gets not yet put */
	bool stale;		      /* out of lookup; deregistered when put */
};

struct reg_cache {
	pthread_mutex_t lock;
	struct reg_cache_ops ops;
	void *ctx;
	uintptr_t page;
	uint64_t clock;
	struct reg_entry entries[REG_CACHE_ENTRIES];
};

/* Both atomic. */
static size_t budget = 64u << 20;
static size_t registered;

#define for_each_entry(rc, e)                                              \
	for ((e) = (rc)->entries; (e) < (rc)->entries + REG_CACHE_ENTRIES; \
	     (e)++)

struct reg_cache *reg_cache_create(const struct reg_cache_ops *ops, void *ctx)
{
	struct reg_cache *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return NULL;
	pthread_mutex_init(&rc->lock, NULL);
	rc->ops = *ops;
	rc->ctx = ctx;
	rc->page = (uintptr_t)sysconf(_SC_PAGESIZE);
	return rc;
}

static uintptr_t page_down(const struct reg_cache *rc, uintptr_t p)
{
	return p & ~(rc->page - 1);
}

static uintptr_t page_up(const struct reg_cache *rc, uintptr_t p)
{
	return (p + rc->page - 1) & ~(rc->page - 1);
}

/* Counts bytes into the process's total if they fit the budget. */
static bool reserve(size_t bytes)
{
	size_t limit = __atomic_load_n(&budget, __ATOMIC_RELAXED);
	size_t now = __atomic_load_n(&registered, __ATOMIC_RELAXED);

	do {
		if (bytes > limit || now > limit - bytes)
			return false;
	} while (!__atomic_compare_exchange_n(&registered, &now, now + bytes,
					      true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return true;
}

static void unreserve(size_t bytes)
{
	__atomic_sub_fetch(&registered, bytes, __ATOMIC_RELAXED);
}

static void drop(struct reg_cache *rc, struct reg_entry *e)
{
	size_t bytes = e->hi - e->lo;

	rc->ops.dereg(e->mr);
	unreserve(bytes);
	stats_mem_registered(-(int64_t)bytes);
	memset(e, 0, sizeof(*e));
}

/* The allocation under e was freed: nobody may find it again. */
static void forget(struct reg_cache *rc, struct reg_entry *e)
{
	e->stale = true;
	stats_mem_event(STATS_MEM_REGISTRATION_STALE, 1);
	if (!e->refs)
		drop(rc, e);
}

/* The entry of id that covers [lo, hi); forgets stale ones on the way. */
static struct reg_entry *lookup(struct reg_cache *rc, uint64_t id, uintptr_t lo,
				uintptr_t hi)
{
	struct reg_entry *e, *hit = NULL;

	for_each_entry(rc, e)
	{
		if (!e->mr || e->stale)
			continue;
		if (e->id == id) {
			if (e->lo <= lo && hi <= e->hi)
				hit = e;
		} else if (e->alloc_lo < hi && lo < e->alloc_hi) {
			forget(rc, e);
		}
	}
	return hit;
}

/* Stale entries nobody holds are gone already: only live ones qualify. */
static struct reg_entry *least_recently_used(struct reg_cache *rc)
{
	struct reg_entry *e, *lru = NULL;

	for_each_entry(rc, e)
	{
		if (e->mr && !e->refs && (!lru || e->used < lru->used))
			lru = e;
	}
	return lru;
}

static struct reg_entry *free_slot(struct reg_cache *rc)
{
	struct reg_entry *e;

	for_each_entry(rc, e)
	{
		if (!e->mr)
			return e;
	}
	return NULL;
}

/*
 * Registers the pages of [alloc_lo, alloc_hi), or those of [lo, hi) when
 * that is more than a quarter of the budget, evicting to make room.
 */
static struct reg_entry *add(struct reg_cache *rc, uint64_t id,
			     uintptr_t alloc_lo, uintptr_t alloc_hi,
			     uintptr_t lo, uintptr_t hi, int *err)
{
	uintptr_t first = page_down(rc, alloc_lo), end = page_up(rc, alloc_hi);
	struct reg_entry *e, *victim;
	void *mr;

	if (end - first > __atomic_load_n(&budget, __ATOMIC_RELAXED) / 4) {
		first = page_down(rc, lo);
		end = page_up(rc, hi);
	}
	/* What can never fit must not empty the cache first. */
	if (end - first > __atomic_load_n(&budget, __ATOMIC_RELAXED)) {
		*err = -ENOMEM;
		return NULL;
	}
	for (;;) {
		e = free_slot(rc);
		if (e && reserve(end - first))
			break;
		victim = least_recently_used(rc);
		if (!victim) {
			*err = -ENOMEM;
			return NULL;
		}
		drop(rc, victim);
		stats_mem_event(STATS_MEM_EVICTION, 1);
	}
	mr = rc->ops.reg(rc->ctx, (void *)first, end - first);
	if (!mr) {
		*err = errno ? -errno : -EIO;
		unreserve(end - first);
		return NULL;
	}
	stats_mem_event(STATS_MEM_REGISTRATION, 1);
	stats_mem_registered((int64_t)(end - first));
	*e = (struct reg_entry){
		.mr = mr,
		.lo = first,
		.hi = end,
		.alloc_lo = alloc_lo,
		.alloc_hi = alloc_hi,
		.id = id,
	};
	return e;
}

void *reg_cache_get(struct reg_cache *rc, uintptr_t start, size_t size,
		    uint64_t id, const void *buf, size_t len, int *err)
{
	uintptr_t lo = (uintptr_t)buf, hi = lo + len;
	struct reg_entry *e;
	void *mr = NULL;

	/* No allocation that holds the buffer: the buffer stands for it. */
	if (lo < start || len > size || lo - start > size - len) {
		start = lo;
		size = len;
	}
	pthread_mutex_lock(&rc->lock);
	e = lookup(rc, id, lo, hi);
	if (e)
		stats_mem_event(STATS_MEM_REGISTRATION_HIT, 1);
	else
		e = add(rc, id, start, start + size, lo, hi, err);
	if (e) {
		e->refs++;
		e->used = ++rc->clock;
		mr = e->mr;
	} else {
		stats_mem_event(STATS_MEM_REGISTRATION_FAILURE, 1);
	}
	pthread_mutex_unlock(&rc->lock);
	return mr;
}

void reg_cache_put(struct reg_cache *rc, void *mr)
{
	struct reg_entry *e;

	pthread_mutex_lock(&rc->lock);
	for_each_entry(rc, e)
	{
		if (e->mr != mr)
			continue;
		if (!--e->refs && e->stale)
			drop(rc, e);
		break;
	}
	pthread_mutex_unlock(&rc->lock);
}

void reg_cache_destroy(struct reg_cache *rc)
{
	struct reg_entry *e;

	for_each_entry(rc, e)
	{
		if (e->mr)
			drop(rc, e);
	}
	pthread_mutex_destroy(&rc->lock);
	free(rc);
}

void reg_cache_trim(struct reg_cache *rc)
{
	struct reg_entry *e;

	pthread_mutex_lock(&rc->lock);
	for_each_entry(rc, e)
	{
		if (e->mr && !e->refs)
			drop(rc, e);
	}
	pthread_mutex_unlock(&rc->lock);
}

size_t reg_cache_budget(void)
{
	return __atomic_load_n(&budget, __ATOMIC_RELAXED);
}

void reg_cache_set_budget(size_t bytes)
{
	__atomic_store_n(&budget, bytes, __ATOMIC_RELAXED);
}

size_t reg_cache_registered_bytes(void)
{
	return __atomic_load_n(&registered, __ATOMIC_RELAXED);
}
