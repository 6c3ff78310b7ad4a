// SPDX-License-Identifier: MIT
/*
 * doorbell_time: a preload for benchmarks that times the system call in
 * which a queue pair's send is handed to the kernel.
 *
 * Soft-RoCE's verbs provider rings the doorbell of every ibv_post_send()
 * with a write(2) of the POST_SEND command to the uverbs device, and the
 * kernel then builds, sends and delivers the packet inside that call.  In
 * the emulated fabric that one call is most of a message's latency: its
 * duration, side by side for roceshim and rsocket, splits a latency gap
 * into the kernel's share and the library's.
 *
 * Preload it first (LD_PRELOAD="libdoorbell_time.so libroceshim.so"), so
 * that its write() runs before any other.  At exit it prints to stderr:
 *   doorbell_time: pid P: N doorbells, median M us, p10 A us, p90 B us
 * Two knobs delay every doorbell, to see what the time between two
 * messages does to the kernel's time in the next one (and to latency):
 * DOORBELL_TIME_TOUCH_PAGES=N writes one byte to each of N pages of its
 * own first, DOORBELL_TIME_WAIT_NS=N busy-waits N ns on the TSC first,
 * touching no memory.
 *
 * Times with the TSC (calibrated against CLOCK_MONOTONIC over the run):
 * in the fabric's guest the clock is HPET, and reading it is itself a
 * system call of about 1.6 us.  x86-64 only.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <rdma/ib_user_verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define MAX_FDS	    1024
#define MAX_SAMPLES (1u << 20)
#define PAGE	    4096

enum fd_kind {
	FD_UNKNOWN,
	FD_UVERBS,
	FD_OTHER
};

static ssize_t (*next_write)(int, const void *, size_t);
static int (*next_close)(int);
static unsigned char fd_kinds[MAX_FDS];
static uint32_t samples[MAX_SAMPLES];
static unsigned int nsamples;
static unsigned char *touch_area;
static long touch_pages;
static uint64_t wait_ticks;
static uint64_t tsc_start;
static struct timespec clock_start;

/* A non-negative decimal from the environment, at most max; else 0. */
static long env_long(const char *name, long max)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s)
		return 0;
	v = strtol(s, &end, 10);
	return *s && !*end && v >= 0 && v <= max ? v : 0;
}

static uint64_t ticks_per_us(void)
{
	struct timespec now;
	double us;

	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (now.tv_sec - clock_start.tv_sec) * 1e6 +
	     (now.tv_nsec - clock_start.tv_nsec) / 1e3;
	return us > 0 ? (uint64_t)((__rdtsc() - tsc_start) / us) : 0;
}

__attribute__((constructor)) static void doorbell_time_init(void)
{
	struct timespec pause = { .tv_nsec = 10000000 };
	long wait_ns;

	next_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT,
								  "write");
	next_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
	touch_pages = env_long("DOORBELL_TIME_TOUCH_PAGES", 65536);
	if (touch_pages)
		touch_area = calloc(touch_pages, PAGE);
	if (!touch_area)
		touch_pages = 0;
	clock_gettime(CLOCK_MONOTONIC, &clock_start);
	tsc_start = __rdtsc();
	wait_ns = env_long("DOORBELL_TIME_WAIT_NS", 1000000);
	if (wait_ns) {
		/* The TSC's rate, over 10 ms: the wait is in its ticks. */
		nanosleep(&pause, NULL);
		wait_ticks = ticks_per_us() * wait_ns / 1000;
	}
}

/* Whether fd is a uverbs device: asked once per open file (see close()). */
static bool is_uverbs(int fd)
{
	char path[32], target[PATH_MAX];
	ssize_t n;

	if (fd < 0 || fd >= MAX_FDS)
		return false;
	if (fd_kinds[fd] == FD_UNKNOWN) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		fd_kinds[fd] = FD_OTHER;
		if (n > 0) {
			target[n] = '\0';
			if (!strncmp(target, "/dev/infiniband/uverbs", 22))
				fd_kinds[fd] = FD_UVERBS;
		}
	}
	return fd_kinds[fd] == FD_UVERBS;
}

static bool is_post_send(const void *buf, size_t len)
{
	struct ib_uverbs_cmd_hdr hdr;

	if (len < sizeof(hdr))
		return false;
	memcpy(&hdr, buf, sizeof(hdr));
	return hdr.command == IB_USER_VERBS_CMD_POST_SEND;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	unsigned int slot;
	uint64_t start;
	ssize_t ret;
	long i;

	if (!next_write) {
		errno = ENOSYS;
		return -1;
	}
	if (!is_uverbs(fd) || !is_post_send(buf, len))
		return next_write(fd, buf, len);
	for (i = 0; i < touch_pages; i++)
		touch_area[i * PAGE]++;
	start = __rdtsc();
	while (wait_ticks && __rdtsc() - start < wait_ticks)
		;
	start = __rdtsc();
	ret = next_write(fd, buf, len);
	/* Threads may ring doorbells at once: each takes its own slot. */
	slot = __atomic_fetch_add(&nsamples, 1, __ATOMIC_RELAXED);
	if (slot < MAX_SAMPLES)
		samples[slot] = (uint32_t)(__rdtsc() - start);
	return ret;
}

int close(int fd)
{
	if (fd >= 0 && fd < MAX_FDS)
		fd_kinds[fd] = FD_UNKNOWN;
	if (!next_close) {
		errno = ENOSYS;
		return -1;
	}
	return next_close(fd);
}

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

__attribute__((destructor)) static void doorbell_time_report(void)
{
	unsigned int n = nsamples < MAX_SAMPLES ? nsamples : MAX_SAMPLES;
	double per_us;

	if (!n)
		return;
	per_us = (double)ticks_per_us();
	if (per_us <= 0)
		return;
	qsort(samples, n, sizeof(samples[0]), compare_u32);
	fprintf(stderr,
		"doorbell_time: pid %d: %u doorbells, median %.1f us, "
		"p10 %.1f us, p90 %.1f us\n",
		getpid(), n, samples[n / 2] / per_us, samples[n / 10] / per_us,
		samples[(uint64_t)n * 9 / 10] / per_us);
}
