/* SPDX-License-Identifier: MIT */
/*
 * What kind of memory a buffer is, as the CUDA driver says: pageable,
 * pinned (page-locked by CUDA), device or managed.
 *
 * Contract: roceshim never links CUDA and never initialises it.  The
 * driver (libcuda.so.1) is asked only when the program has loaded it
 * already (dlopen with RTLD_NOLOAD, looked for again at most once a
 * second, and once in 64 calls of a thread, until found), and only through
 * cuPointerGetAttributes(), which answers from any thread, with or without a
 * CUDA context.  Before the program initialised CUDA, in a fork child of a
 * process that had CUDA, with ROCESHIM_CUDA=0, or when the driver fails to
 * answer, every buffer is pageable.  The answer is the driver's at the moment
 * of the call: only it knows when memory is freed, so nothing here is
 * remembered between calls (the registration cache checks its entries by the
 * allocation's buffer id, reg_cache.h).  Thread safe.
 */
#ifndef ROCESHIM_CUDA_MEM_H
#define ROCESHIM_CUDA_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roceshim/stats.h>

struct mem_info {
	enum roceshim_mem_class cls;
	uint64_t buffer_id; /* CUDA's id of the allocation; 0: none given */
	uintptr_t start;    /* the allocation: [start, start + size) */
	size_t size;
};

/* ROCESHIM_CUDA=0 turns classification off (every buffer is pageable). */
void cuda_mem_configure(bool enabled);

/*
 * Whether buffers may be other than pageable: the program has loaded
 * CUDA's driver.  Cheap: an atomic load and a thread's counter, and
 * until CUDA is found, a clock read once in 64 calls and a
 * dlopen(RTLD_NOLOAD) once a second.
 */
bool cuda_mem_active(void);

/*
 * cuda_mem_active(), exact at the moment of the call: where CUDA was not
 * found yet, it looks again whenever a shared object was loaded since
 * the last look (dl_iterate_phdr's count of loads, one short walk under
 * the loader's lock).  For the calls that must refuse GPU memory.
 */
bool cuda_mem_active_now(void);

/*
 * A socket call of the program's starts on this thread: answers kept
 * for the last one are forgotten.
 */
void cuda_mem_call_begin(void);

/*
 * Classifies the buffer at p (cuda_mem_active() must have said true),
 * asking the driver once per call (cuda_mem_call_begin()).
 */
void cuda_mem_classify(const void *p, struct mem_info *out);

/* The cheap answer for a buffer: pageable unless CUDA is active. */
static inline enum roceshim_mem_class cuda_mem_class(const void *p)
{
	struct mem_info info;

	if (!cuda_mem_active())
		return ROCESHIM_MEM_PAGEABLE;
	cuda_mem_classify(p, &info);
	return info.cls;
}

struct iovec;
/*
 * Counts the bytes that a call moved from iov (tx) or into it, by class,
 * in the stats: nothing unless CUDA is active (found by cuda_mem_active(),
 * so a thread's first calls after CUDA loads may count as pageable) and
 * the process publishes statistics.
 */
void cuda_mem_count(bool tx, const struct iovec *iov, int iovcnt, size_t bytes);
/* Not for callers: cuda_mem_counting()'s countdown, and its slow path. */
extern __thread unsigned int cuda_mem_calls_to_look;
bool cuda_mem_counting_look(void);

/*
 * Whether cuda_mem_count() would count anything now: a kernel-TCP call
 * asks first, and skips the count's call and frame when not.  Inline,
 * so that such a call pays a thread's decrement until CUDA is found (a
 * look once in 64 calls, as cuda_mem_active()); once counting, every
 * call takes the slow path.
 */
static inline bool cuda_mem_counting(void)
{
	if (__builtin_expect(cuda_mem_calls_to_look > 1, 1)) {
		cuda_mem_calls_to_look--;
		return false;
	}
	return cuda_mem_counting_look();
}

/*
 * Before fork, and in the child: a child of a process that loaded CUDA
 * cannot use it, and everything is pageable there.
 */
void cuda_mem_fork_prepare(void);
void cuda_mem_fork_child(void);

#endif /* ROCESHIM_CUDA_MEM_H */
