// SPDX-License-Identifier: MIT
/*
 * io_uring reads and writes a socket in the kernel, from the ring's
 * shared memory, without a call roceshim sees: over RDMA, its receives
 * would find the kernel socket idle and its sends would land beside the
 * stream.  So the process gives up RDMA when it sets up a ring
 * (track_io_uring()), at every door roceshim can watch: liburing's
 * set-up calls, whose own system calls are inline, and syscall()
 * (shim.c), which the Rust and Java bindings use.  A program that makes
 * the system call inline itself is out of reach (README, "Limitations").
 *
 * liburing's functions are found with dlsym(RTLD_NEXT): a program that
 * calls one has liburing loaded.  Their arguments pass through untouched,
 * so they are declared without liburing's types.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>

#include "shim.h"
#include "track.h"

struct io_uring_params;
struct io_uring;

/* liburing's, as <liburing.h> declares them. */
int io_uring_setup(unsigned int entries, struct io_uring_params *p);
int io_uring_queue_init_params(unsigned int entries, struct io_uring *ring,
			       struct io_uring_params *p);
int io_uring_queue_init(unsigned int entries, struct io_uring *ring,
			unsigned int flags);
int io_uring_queue_init_mem(unsigned int entries, struct io_uring *ring,
			    struct io_uring_params *p, void *buf,
			    size_t buf_size);

static void before_setup(void)
{
	shim_ensure_init();
	if (shim_tracking())
		track_io_uring();
}

/* liburing's function name, or NULL. */
static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

void shim_uring_syscall(long number)
{
	if (number == SYS_io_uring_setup)
		before_setup();
}

SHIM_EXPORT int io_uring_setup(unsigned int entries, struct io_uring_params *p)
{
	int (*fn)(unsigned int, struct io_uring_params *);

	before_setup();
	*(void **)&fn = next("io_uring_setup");
	return fn ? fn(entries, p) : -ENOSYS;
}

SHIM_EXPORT int io_uring_queue_init_params(unsigned int entries,
					   struct io_uring *ring,
					   struct io_uring_params *p)
{
	int (*fn)(unsigned int, struct io_uring *, struct io_uring_params *);

	before_setup();
	*(void **)&fn = next("io_uring_queue_init_params");
	return fn ? fn(entries, ring, p) : -ENOSYS;
}

SHIM_EXPORT int io_uring_queue_init(unsigned int entries, struct io_uring *ring,
				    unsigned int flags)
{
	int (*fn)(unsigned int, struct io_uring *, unsigned int);

	before_setup();
	*(void **)&fn = next("io_uring_queue_init");
	return fn ? fn(entries, ring, flags) : -ENOSYS;
}

SHIM_EXPORT int io_uring_queue_init_mem(unsigned int entries,
					struct io_uring *ring,
					struct io_uring_params *p, void *buf,
					size_t buf_size)
{
	int (*fn)(unsigned int, struct io_uring *, struct io_uring_params *,
		  void *, size_t);

	before_setup();
	*(void **)&fn = next("io_uring_queue_init_mem");
	return fn ? fn(entries, ring, p, buf, buf_size) : -ENOSYS;
}
