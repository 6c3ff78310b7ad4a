// SPDX-License-Identifier: MIT
/*
 * What the CUDA driver says of each kind of memory roceshim may see at a
 * socket, and what asking costs: run on a machine with a GPU (docs/cuda.md).
 * It declares the few driver types it needs, like roceshim's classifier,
 * and needs no CUDA headers to build.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef int cu_result;
typedef unsigned long long cu_ptr;

enum {
	ATTR_MEMORY_TYPE = 2,
	ATTR_BUFFER_ID = 7,
	ATTR_IS_MANAGED = 8,
	ATTR_RANGE_START = 11,
	ATTR_RANGE_SIZE = 12,
};

static cu_result (*get_attrs)(unsigned int, int *, void **, cu_ptr);
static cu_result (*cu_init)(unsigned int);
static cu_result (*dev_get)(int *, int);
static cu_result (*ctx_retain)(void **, int);
static cu_result (*ctx_set)(void *);
static cu_result (*host_alloc)(void **, size_t, unsigned int);
static cu_result (*host_free)(void *);
static cu_result (*mem_alloc)(cu_ptr *, size_t);
static cu_result (*mem_free)(cu_ptr);
static cu_result (*managed_alloc)(cu_ptr *, size_t, unsigned int);
static cu_result (*host_register)(void *, size_t, unsigned int);
static cu_result (*host_unregister)(void *);

struct answer {
	cu_result rc;
	unsigned int type;
	unsigned long long id;
	unsigned int managed;
	void *start;
	size_t size;
};

static struct answer ask(const void *p)
{
	struct answer a = { 0 };
	int attrs[] = { ATTR_MEMORY_TYPE, ATTR_BUFFER_ID, ATTR_IS_MANAGED,
			ATTR_RANGE_START, ATTR_RANGE_SIZE };
	void *data[] = { &a.type, &a.id, &a.managed, &a.start, &a.size };

	a.rc = get_attrs(5, attrs, data, (cu_ptr)(uintptr_t)p);
	return a;
}

static void show(const char *what, const void *p)
{
	struct answer a = ask(p);

	printf("%-28s rc=%d type=%u id=%llu managed=%u start=%s size=%zu\n",
	       what, a.rc, a.type, a.id, a.managed,
	       a.start == p ? "ptr" : (a.start ? "other" : "0"), a.size);
}

static double ns_per_ask(const void *p)
{
	struct timespec t0, t1;
	int i, n = 200000;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++)
		ask(p);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
}

static void *pinned, *pageable, *registered;
static cu_ptr device, managed;

static void *from_other_thread(void *arg)
{
	(void)arg;
	show("pinned, thread w/o ctx", pinned);
	show("device, thread w/o ctx", (void *)(uintptr_t)device);
	show("pageable, thread w/o ctx", pageable);
	printf("ns per ask, thread w/o ctx: pinned %.0f device %.0f "
	       "pageable %.0f\n",
	       ns_per_ask(pinned), ns_per_ask((void *)(uintptr_t)device),
	       ns_per_ask(pageable));
	return NULL;
}

#define SYM(var, name)                                \
	do {                                          \
		*(void **)&var = dlsym(h, name);      \
		if (!var) {                           \
			printf("missing %s\n", name); \
			return 1;                     \
		}                                     \
	} while (0)

int main(void)
{
	void *h, *ctx, *again;
	size_t big = 4 << 20;
	pthread_t t;
	int dev, i;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("loaded before dlopen: %s\n",
	       dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY) ? "yes" : "no");
	h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		printf("no libcuda: %s\n", dlerror());
		return 1;
	}
	SYM(get_attrs, "cuPointerGetAttributes");
	SYM(cu_init, "cuInit");
	SYM(dev_get, "cuDeviceGet");
	SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
	SYM(ctx_set, "cuCtxSetCurrent");
	SYM(host_alloc, "cuMemHostAlloc");
	SYM(host_free, "cuMemFreeHost");
	SYM(mem_alloc, "cuMemAlloc_v2");
	SYM(mem_free, "cuMemFree_v2");
	SYM(managed_alloc, "cuMemAllocManaged");
	SYM(host_register, "cuMemHostRegister_v2");
	SYM(host_unregister, "cuMemHostUnregister");

	pageable = malloc(big);
	memset(pageable, 1, big);
	show("pageable before cuInit", pageable);
	printf("cuInit %d\n", cu_init(0));
	show("pageable after cuInit", pageable);
	printf("dev %d\n", dev_get(&dev, 0));
	printf("retain %d\n", ctx_retain(&ctx, dev));
	printf("set %d\n", ctx_set(ctx));
	printf("host_alloc %d\n", host_alloc(&pinned, big, 0));
	printf("mem_alloc %d\n", mem_alloc(&device, big));
	printf("managed_alloc %d\n", managed_alloc(&managed, 1 << 20, 1));
	show("pinned", pinned);
	show("pinned + 1 MiB + 3", (char *)pinned + (1 << 20) + 3);
	show("device", (void *)(uintptr_t)device);
	show("managed", (void *)(uintptr_t)managed);
	show("pageable", pageable);
	show("stack", &dev);
	show("null", NULL);
	registered = mmap(NULL, big, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("host_register %d\n", host_register(registered, big, 0));
	show("registered", registered);
	show("registered + 2 MiB", (char *)registered + (2 << 20));
	printf("host_unregister %d\n", host_unregister(registered));
	show("unregistered", registered);
	printf("ns per ask, main: pinned %.0f device %.0f pageable %.0f\n",
	       ns_per_ask(pinned), ns_per_ask((void *)(uintptr_t)device),
	       ns_per_ask(pageable));
	pthread_create(&t, NULL, from_other_thread, NULL);
	pthread_join(t, NULL);
	for (i = 0; i < 3; i++) {
		struct answer a = ask(pinned), b;

		host_free(pinned);
		show("freed pinned", pinned);
		host_alloc(&again, big, 0);
		b = ask(again);
		printf("realloc %d: same address %d, id %llu -> %llu\n", i,
		       again == pinned, a.id, b.id);
		pinned = again;
	}
	mem_free(device);
	show("freed device", (void *)(uintptr_t)device);
	return 0;
}
