/* SPDX-License-Identifier: MIT */
/*
 * Facts about a process read from /proc, shared by the library (which
 * stamps its stats segment) and roceshim-stat (which checks the stamp to
 * tell a live process from a dead one whose pid was reused).
 */
#ifndef ROCESHIM_PROCINFO_H
#define ROCESHIM_PROCINFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Field 22 of /proc/<pid>/stat; 0 when the process does not exist. */
uint64_t procinfo_start_ticks(pid_t pid);

/* The command line with NULs as spaces, truncated; "" when unreadable. */
void procinfo_command(pid_t pid, char *buf, size_t size);

#endif /* ROCESHIM_PROCINFO_H */
