/* SPDX-License-Identifier: MIT */
/*
 * Process-wide state: configuration, start-up and fork handling.
 *
 * Contract: every exported wrapper calls shim_ensure_init() before any
 * other roceshim function, because a wrapper may run before the library's
 * constructor (from another library's constructor).  shim_lookup() returns
 * the tracked sock of fd with a reference, or NULL when fd is untracked or
 * roceshim is disabled; it is the only fd lookup wrappers use.
 */
#ifndef ROCESHIM_SHIM_H
#define ROCESHIM_SHIM_H

#include <stdbool.h>
#include <sys/types.h>

#include "config.h"
#include "fd_table.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

extern struct config shim_config;
extern bool shim_ready;

void shim_init(void);

/*
 * Set on a thread that made a real vfork (its process's pid) until a call
 * on it finds the child gone; initial-exec, so that the test below is one
 * load on every wrapped call.
 */
extern __thread pid_t shim_vfork_parent
	__attribute__((tls_model("initial-exec")));

bool shim_vfork_child_slow(void);

/*
 * true on the thread of a vfork child that has not exec'd yet: it shares
 * its parent's memory, so roceshim must leave its calls alone.
 */
static inline bool shim_in_vfork_child(void)
{
	if (__builtin_expect(!shim_vfork_parent, 1))
		return false;
	return shim_vfork_child_slow();
}

/*
 * In the child of a vfork carried out as fork, the write end of the pipe
 * its parent waits on; -1 anywhere else.  The program's close of it is
 * skipped (interpose_socket.c), so that only the exec or the exit closes
 * it.
 */
int shim_vfork_gate_fd(void);
/*
 * The exec wrappers, once the connections the new program keeps have
 * moved to TCP: such a child tells its parent that it holds none of the
 * others beyond its exec.
 */
void shim_vfork_exec_ready(void);

/* Whether roceshim tracks this call's sockets: on, and not a vfork child. */
static inline bool shim_tracking(void)
{
	return shim_config.enabled && !shim_in_vfork_child();
}

static inline void shim_ensure_init(void)
{
	if (__builtin_expect(!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE),
			     0))
		shim_init();
}

/*
 * interpose_socket.c: a system call made through syscall() that changes
 * what an fd number names (close, close_range, dup, dup2, dup3, fcntl's
 * F_DUPFD), or fcntl's F_SETFL, is tracked as the libc call is, and made: *ret
 * gets its result, as syscall() returns it.  false for every other call.
 */
bool shim_fd_syscall(long number, const long *arg, long *ret);
/* interpose_ctl.c: fcntl made through syscall(), tracked as fcntl() is. */
long shim_fcntl_syscall(const long *arg);

/*
 * interpose_cred.c: a system call made through syscall() that makes new
 * credentials (the set*id family, setgroups, capset, prctl's capability
 * options): the process gives up RDMA first, as the libc wrappers do.
 */
void shim_cred_syscall(long number, const long *arg);

/*
 * interpose_uring.c: io_uring_setup made through syscall(): the process
 * gives up RDMA first, as liburing's set-up calls do.
 */
void shim_uring_syscall(long number);

static inline struct sock *shim_lookup(int fd)
{
	if (!shim_tracking())
		return NULL;
	return fd_table_get(fd);
}

#endif /* ROCESHIM_SHIM_H */
