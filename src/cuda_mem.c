// SPDX-License-Identifier: MIT
/*
 * Memory classes from the CUDA driver, found only where the program
 * loaded it (cuda_mem.h).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <sys/uio.h>

#include "clock.h"
#include "cuda_mem.h"
#include "fork_page.h"
#include "log.h"
#include "stats.h"

/*
 * The few driver declarations used here (the driver API's cuda.h, which
 * configure checks them against where it is installed).
 */
typedef int cu_result;
typedef unsigned long long cu_device_ptr;

enum {
	DRIVER_SUCCESS = 0,
	DRIVER_INVALID_VALUE = 1,
	ATTR_MEMORY_TYPE = 2,
	ATTR_BUFFER_ID = 7,
	ATTR_IS_MANAGED = 8,
	ATTR_RANGE_START = 11,
	ATTR_RANGE_SIZE = 12,
	MEMORY_HOST = 1,
	MEMORY_DEVICE = 2,
	MEMORY_UNIFIED = 4,
};

#ifdef HAVE_CUDA_H
#include <cuda.h>
_Static_assert((int)CU_POINTER_ATTRIBUTE_MEMORY_TYPE == ATTR_MEMORY_TYPE &&
		       (int)CU_POINTER_ATTRIBUTE_BUFFER_ID == ATTR_BUFFER_ID &&
		       (int)CU_POINTER_ATTRIBUTE_IS_MANAGED ==
			       ATTR_IS_MANAGED &&
		       (int)CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ==
			       ATTR_RANGE_START &&
		       (int)CU_POINTER_ATTRIBUTE_RANGE_SIZE == ATTR_RANGE_SIZE,
	       "cuda.h's pointer attributes");
_Static_assert((int)CU_MEMORYTYPE_HOST == MEMORY_HOST &&
		       (int)CU_MEMORYTYPE_DEVICE == MEMORY_DEVICE &&
		       (int)CU_MEMORYTYPE_UNIFIED == MEMORY_UNIFIED &&
		       (int)CUDA_SUCCESS == DRIVER_SUCCESS &&
		       (int)CUDA_ERROR_INVALID_VALUE == DRIVER_INVALID_VALUE,
	       "cuda.h's memory types");
#endif

typedef cu_result get_attributes_fn(unsigned int count, int *attrs, void **data,
				    cu_device_ptr ptr);

enum cuda_state {
	CUDA_UNKNOWN,  /* not looked for yet, or not found at next_look_ms */
	CUDA_FOUND,    /* loaded: get_attributes is set */
	CUDA_DISABLED, /* ROCESHIM_CUDA=0, or a fork child */
};

#define LOOK_AGAIN_MS	 1000
#define LOOK_EVERY_CALLS 64

/* Counts down a thread's calls to its next look (cuda_mem.h). */
__thread unsigned int cuda_mem_calls_to_look = LOOK_EVERY_CALLS;

static enum cuda_state state FORK_DATA = CUDA_UNKNOWN;
static int64_t next_look_ms;
static get_attributes_fn *get_attributes;

void cuda_mem_configure(bool enabled)
{
	__atomic_store_n(&state, enabled ? CUDA_UNKNOWN : CUDA_DISABLED,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&next_look_ms, 0, __ATOMIC_RELAXED);
}

/*
 * CUDA is not usable in the child of a process that loaded it; a child of
 * one that had not may load it itself.  So the parent looks before it
 * forks, where it has not found the driver yet.
 */
void FORK_CODE cuda_mem_fork_child(void)
{
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CUDA_FOUND)
		__atomic_store_n(&state, CUDA_DISABLED, __ATOMIC_RELEASE);
}

/*
 * RTLD_NOLOAD: the driver only if the program has it; its handle is
 * kept, so it stays loaded while get_attributes may be called.
 */
static void look_for_driver(void)
{
	void *driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
	get_attributes_fn *fn;

	if (!driver)
		return;
	fn = (get_attributes_fn *)dlsym(driver, "cuPointerGetAttributes");
	if (!fn) {
		dlclose(driver);
		return;
	}
	__atomic_store_n(&get_attributes, fn, __ATOMIC_RELEASE);
	__atomic_store_n(&state, CUDA_FOUND, __ATOMIC_RELEASE);
	log_info("cuda: the program loaded the CUDA driver: buffers are "
		 "classified");
}

/* A look costs the loader's search: only after a shared object loaded. */
void FORK_CODE cuda_mem_fork_prepare(void)
{
	cuda_mem_active_now();
}

/* Where CUDA is not found yet, a look at most once a second. */
static bool active_after_look(void)
{
	enum cuda_state s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	int64_t now;

	if (s != CUDA_UNKNOWN)
		return s == CUDA_FOUND;
	now = clock_ms();
	if (now < __atomic_load_n(&next_look_ms, __ATOMIC_RELAXED))
		return false;
	__atomic_store_n(&next_look_ms, now + LOOK_AGAIN_MS, __ATOMIC_RELAXED);
	look_for_driver();
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == CUDA_FOUND;
}

bool cuda_mem_active(void)
{
	enum cuda_state s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);

	if (s != CUDA_UNKNOWN)
		return s == CUDA_FOUND;
	/* The clock only every LOOK_EVERY_CALLS calls of a thread. */
	if (cuda_mem_calls_to_look > 1) {
		cuda_mem_calls_to_look--;
		return false;
	}
	cuda_mem_calls_to_look = LOOK_EVERY_CALLS;
	return active_after_look();
}

static int FORK_CODE first_object(struct dl_phdr_info *info, size_t size,
				  void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

/*
 * seen_adds moves on only after a look: a thread that finds it equal to
 * the loads it counted knows that a look made since found nothing.  No
 * lock of ours is held across dlopen(): a constructor that sends, run
 * under the loader's lock, must not wait for a thread that waits for it.
 */
bool FORK_CODE cuda_mem_active_now(void)
{
	static unsigned long long seen_adds;
	enum cuda_state s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	unsigned long long adds = 0;

	if (s != CUDA_UNKNOWN)
		return s == CUDA_FOUND;
	dl_iterate_phdr(first_object, &adds);
	if (__atomic_load_n(&seen_adds, __ATOMIC_ACQUIRE) == adds)
		return false;
	look_for_driver();
	__atomic_store_n(&seen_adds, adds, __ATOMIC_RELEASE);
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == CUDA_FOUND;
}

/*
 * The answers of the thread's current socket call: a buffer is asked
 * about once per call, however many steps of the call look at it.
 */
#define MEMO_SIZE 8

struct memo {
	unsigned int n;
	const void *p[MEMO_SIZE];
	struct mem_info info[MEMO_SIZE];
};

static __thread struct memo memo;

void cuda_mem_call_begin(void)
{
	memo.n = 0;
}

static void ask_driver(const void *p, struct mem_info *out);

void cuda_mem_classify(const void *p, struct mem_info *out)
{
	unsigned int i;

	for (i = 0; i < memo.n; i++) {
		if (memo.p[i] == p) {
			*out = memo.info[i];
			return;
		}
	}
	ask_driver(p, out);
	if (memo.n < MEMO_SIZE) {
		memo.p[memo.n] = p;
		memo.info[memo.n++] = *out;
	}
}

static void ask_driver(const void *p, struct mem_info *out)
{
	get_attributes_fn *fn =
		__atomic_load_n(&get_attributes, __ATOMIC_ACQUIRE);
	unsigned int type = 0, managed = 0;
	unsigned long long id = 0, start = 0;
	size_t size = 0;
	int attrs[] = { ATTR_MEMORY_TYPE, ATTR_BUFFER_ID, ATTR_IS_MANAGED,
			ATTR_RANGE_START, ATTR_RANGE_SIZE };
	void *data[] = { &type, &id, &managed, &start, &size };
	cu_result rc;

	*out = (struct mem_info){ .cls = ROCESHIM_MEM_PAGEABLE };
	if (!fn)
		return;
	rc = fn(5, attrs, data, (cu_device_ptr)(uintptr_t)p);
	/* A driver before the range attributes: the class without them. */
	if (rc == DRIVER_INVALID_VALUE) {
		type = managed = 0;
		id = start = 0;
		size = 0;
		rc = fn(3, attrs, data, (cu_device_ptr)(uintptr_t)p);
	}
	/*
	 * Not initialised (no CUDA memory can exist yet), or another
	 * error: pageable.
	 */
	if (rc != DRIVER_SUCCESS)
		return;
	if (managed)
		out->cls = ROCESHIM_MEM_MANAGED;
	else if (type == MEMORY_HOST)
		out->cls = ROCESHIM_MEM_PINNED;
	else if (type == MEMORY_DEVICE || type == MEMORY_UNIFIED)
		out->cls = ROCESHIM_MEM_DEVICE;
	else
		return;
	out->buffer_id = id;
	out->start = (uintptr_t)start;
	out->size = size;
	/* No range, or one that does not hold p: the buffer alone. */
	if (out->start > (uintptr_t)p || (uintptr_t)p - out->start >= size)
		out->size = 0;
}

bool cuda_mem_counting_look(void)
{
	bool counting = active_after_look() && stats_segment();

	/* While it counts, every call asks again (a fork child stops). */
	cuda_mem_calls_to_look = counting ? 1 : LOOK_EVERY_CALLS;
	return counting;
}

void cuda_mem_count(bool tx, const struct iovec *iov, int iovcnt, size_t bytes)
{
	size_t n;
	int i;

	if (!stats_segment() || !cuda_mem_active())
		return;
	for (i = 0; i < iovcnt && bytes; i++) {
		n = iov[i].iov_len < bytes ? iov[i].iov_len : bytes;
		if (n)
			stats_mem_bytes(tx, cuda_mem_class(iov[i].iov_base), n);
		bytes -= n;
	}
}
