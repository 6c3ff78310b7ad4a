/* SPDX-License-Identifier: MIT */
/*
 * A cache of memory registrations of CUDA-pinned host memory, one cache
 * per transport (a registration belongs to one protection domain).
 *
 * Why: a program that sends from pinned memory reuses the same
 * allocations iteration after iteration, and registering a buffer for
 * every send (pinning and mapping its pages in the device) costs far more
 * than the send.  So a registration outlives the send that made it, and
 * covers the whole allocation when that is small enough, so that the next
 * buffer in it is found.
 *
 * Why by buffer id: a preload cannot see cudaFreeHost(), so an entry may
 * describe memory the program freed and CUDA gave out again at the same
 * address.  The driver gives each allocation an id (cuda_mem.h) that is
 * never reused: a hit must have the caller's id, and an entry whose
 * allocation overlaps the buffer under another id is stale, never used
 * again, and deregistered as soon as nobody holds it.  Pageable memory is
 * never cached: glibc may give it back with munmap() inside free(), which
 * is just as invisible and has no id to tell.
 *
 * Contract: an entry covers whole pages: the allocation's, or only those
 * of the buffer when the allocation is more than a quarter of the budget.
 * Entries held (got and not yet put) are never deregistered.  All caches
 * of the process together hold at most the budget registered: a cache
 * makes room by deregistering its own least recently used entries that
 * nobody holds, never another cache's.  A cache holds at most
 * REG_CACHE_ENTRIES entries.  Registration goes through ops, never verbs
 * directly.  A fork child never uses the caches it inherits: its
 * connections move to TCP.  Thread safe: one mutex per cache, held across
 * ops->reg and ops->dereg (which must not call back into the cache); the byte
 * count is a global atomic.
 */
#ifndef ROCESHIM_REG_CACHE_H
#define ROCESHIM_REG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define REG_CACHE_ENTRIES 64

struct reg_cache_ops {
	/*
	 * Registers len bytes at addr (page aligned): the registration, or
	 * NULL with errno set.
	 */
	void *(*reg)(void *ctx, void *addr, size_t len);
	void (*dereg)(void *mr);
};

struct reg_cache;

/* NULL on ENOMEM. */
struct reg_cache *reg_cache_create(const struct reg_cache_ops *ops, void *ctx);

/*
 * The registration that covers [buf, buf + len), a buffer inside the
 * CUDA allocation [start, start + size) whose buffer id is id (from the
 * driver, cuda_mem.h): found, or registered now, with a reference taken
 * that reg_cache_put() gives back.  len must be more than 0.  A buffer
 * that is not inside the allocation (a driver that gave no range) stands
 * for its allocation itself.  Returns NULL with *err a negative errno: -ENOMEM
 * (over the budget even after evicting, or every entry held), or the
 * registration's error (-errno from ops->reg).
 */
void *reg_cache_get(struct reg_cache *rc, uintptr_t start, size_t size,
		    uint64_t id, const void *buf, size_t len, int *err);
void reg_cache_put(struct reg_cache *rc, void *mr);

/* Deregisters everything: every reference must have been put. */
void reg_cache_destroy(struct reg_cache *rc);

/* Deregisters every entry nobody holds (the connection left RDMA). */
void reg_cache_trim(struct reg_cache *rc);

/*
 * The most bytes all caches of the process may hold registered together
 * (0: none may); 64 MiB until set.  Lowering it evicts nothing at once:
 * the next registrations make room.
 */
void reg_cache_set_budget(size_t bytes);
size_t reg_cache_budget(void);

/* Bytes registered by all caches now. */
size_t reg_cache_registered_bytes(void);

#endif /* ROCESHIM_REG_CACHE_H */
