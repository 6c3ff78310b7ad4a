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

#include "config.h"
#include "fd_table.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

extern struct config shim_config;
extern bool shim_ready;

void shim_init(void);

/*
 * true on the thread of a vfork child that has not exec'd yet: it shares
 * its parent's memory, so roceshim must leave its calls alone.
 */
bool shim_in_vfork_child(void);

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

static inline struct sock *shim_lookup(int fd)
{
	if (!shim_tracking())
		return NULL;
	return fd_table_get(fd);
}

#endif /* ROCESHIM_SHIM_H */
