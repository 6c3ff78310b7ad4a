/* SPDX-License-Identifier: MIT */
/*
 * A test double of the CUDA driver library, for tests only.  It proves
 * nothing about real GPUs: it answers as the driver was seen to answer
 * (bench/gpu/cuda_probe.c), for memory the test says is CUDA's.
 *
 * libcuda_double.so carries the soname libcuda.so.1, so that once a test
 * program has loaded it, dlopen("libcuda.so.1", RTLD_NOLOAD) finds it as
 * it would find the real driver.  It exports cuInit() and
 * cuPointerGetAttributes(): before cuInit() every query fails with
 * CUDA_ERROR_NOT_INITIALIZED (3); after it, memory the test marked answers
 * with its type, buffer id and allocation range, and any other memory
 * answers all zeros.  Only the memory type, buffer id, is-managed, range
 * start and range size attributes are known; asking for another fails with
 * CUDA_ERROR_INVALID_VALUE (1).  Thread safe.
 */
#ifndef ROCESHIM_CUDA_DOUBLE_H
#define ROCESHIM_CUDA_DOUBLE_H

#include <stddef.h>
#include <stdint.h>

enum cuda_double_kind {
	CUDA_DOUBLE_PINNED = 1,	 /* cuMemHostAlloc: memory type 1 (host) */
	CUDA_DOUBLE_DEVICE = 2,	 /* cuMemAlloc: memory type 2 (device) */
	CUDA_DOUBLE_MANAGED = 3, /* cuMemAllocManaged: type 2, is_managed 1 */
};

/*
 * [addr, addr + len) is now an allocation of this kind, as if CUDA had
 * just allocated it there.  Returns its buffer id: each allocation gets
 * the next of a process-wide counter that starts at 1000.
 */
uint64_t cuda_double_mark(void *addr, size_t len, int kind);

/* The allocation that starts at addr is freed: it answers all zeros. */
void cuda_double_unmark(void *addr);

/* How many times cuPointerGetAttributes() was called. */
uint64_t cuda_double_queries(void);

/* The driver's own entry points, as its header declares them. */
int cuInit(unsigned int flags);
int cuPointerGetAttributes(unsigned int count, int *attrs, void **data,
			   unsigned long long ptr);

#endif /* ROCESHIM_CUDA_DOUBLE_H */
