// SPDX-License-Identifier: MIT
/*
 * The CUDA driver test double (cuda_double.h): for tests only.  The
 * allocations the test marked live in a small table under a mutex; the
 * driver forgets an allocation when it is freed, and so does this.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_double.h"

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_NOT_INITIALIZED = 3,
};

enum {
	ATTR_MEMORY_TYPE = 2,  /* unsigned int */
	ATTR_BUFFER_ID = 7,    /* unsigned long long */
	ATTR_IS_MANAGED = 8,   /* unsigned int */
	ATTR_RANGE_START = 11, /* CUdeviceptr: unsigned long long */
	ATTR_RANGE_SIZE = 12,  /* size_t */
};

enum {
	MEMORY_TYPE_HOST = 1,
	MEMORY_TYPE_DEVICE = 2,
};

#define MAX_ALLOCATIONS 64

struct allocation {
	uintptr_t start;
	size_t len; /* 0: a free slot */
	int kind;
	uint64_t id;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct allocation table[MAX_ALLOCATIONS];
static uint64_t next_id = 1000;
static bool initialised;
static uint64_t queries;

uint64_t cuda_double_mark(void *addr, size_t len, int kind)
{
	struct allocation *free_slot = NULL;
	uint64_t id;
	int i;

	if (!len || kind < CUDA_DOUBLE_PINNED || kind > CUDA_DOUBLE_MANAGED) {
		fprintf(stderr, "cuda_double_mark: bad length or kind\n");
		abort();
	}
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_ALLOCATIONS && !free_slot; i++)
		if (!table[i].len)
			free_slot = &table[i];
	if (!free_slot) {
		fprintf(stderr, "cuda_double_mark: more than %d allocations\n",
			MAX_ALLOCATIONS);
		abort();
	}
	id = next_id++;
	*free_slot = (struct allocation){
		.start = (uintptr_t)addr, .len = len, .kind = kind, .id = id
	};
	pthread_mutex_unlock(&lock);
	return id;
}

void cuda_double_unmark(void *addr)
{
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_ALLOCATIONS; i++)
		if (table[i].len && table[i].start == (uintptr_t)addr)
			table[i].len = 0;
	pthread_mutex_unlock(&lock);
}

uint64_t cuda_double_queries(void)
{
	return __atomic_load_n(&queries, __ATOMIC_RELAXED);
}

int cuInit(unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	__atomic_store_n(&initialised, true, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

static bool attribute_known(int attr)
{
	switch (attr) {
	case ATTR_MEMORY_TYPE:
	case ATTR_BUFFER_ID:
	case ATTR_IS_MANAGED:
	case ATTR_RANGE_START:
	case ATTR_RANGE_SIZE:
		return true;
	}
	return false;
}

static unsigned int memory_type(const struct allocation *a)
{
	if (!a->len)
		return 0;
	return a->kind == CUDA_DOUBLE_PINNED ? MEMORY_TYPE_HOST
					     : MEMORY_TYPE_DEVICE;
}

/* What the driver says of a, or of memory it does not know (a zeroed). */
static void answer(const struct allocation *a, int attr, void *data)
{
	switch (attr) {
	case ATTR_MEMORY_TYPE:
		*(unsigned int *)data = memory_type(a);
		break;
	case ATTR_BUFFER_ID:
		*(unsigned long long *)data = a->id;
		break;
	case ATTR_IS_MANAGED:
		*(unsigned int *)data =
			a->len && a->kind == CUDA_DOUBLE_MANAGED;
		break;
	case ATTR_RANGE_START:
		*(unsigned long long *)data = a->start;
		break;
	case ATTR_RANGE_SIZE:
		*(size_t *)data = a->len;
		break;
	}
}

int cuPointerGetAttributes(unsigned int count, int *attrs, void **data,
			   unsigned long long ptr)
{
	struct allocation found = { 0 };
	unsigned int i;
	int j;

	__atomic_add_fetch(&queries, 1, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&initialised, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_NOT_INITIALIZED;
	for (i = 0; i < count; i++)
		if (!attribute_known(attrs[i]))
			return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (j = 0; j < MAX_ALLOCATIONS; j++)
		if (table[j].len && ptr >= table[j].start &&
		    ptr - table[j].start < table[j].len)
			found = table[j];
	pthread_mutex_unlock(&lock);
	for (i = 0; i < count; i++)
		answer(&found, attrs[i], data[i]);
	return CUDA_SUCCESS;
}
