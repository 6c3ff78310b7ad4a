/* SPDX-License-Identifier: MIT */
/*
 * Reading the stats segments that processes under roceshim publish in
 * /dev/shm (<roceshim/stats.h>).
 *
 * Contract: a segment is input from another program.  segment_read()
 * checks every field that sizes or indexes anything before use and
 * returns a private, consistent copy, or a negative errno with the reason
 * printed on stderr (unless quiet).  Rows are copied under their sequence
 * counts, free rows are left out, and the totals are copied after the
 * rows, so the sum of the rows never exceeds them.
 */
#ifndef ROCESHIM_TOOLS_SEGMENT_H
#define ROCESHIM_TOOLS_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <roceshim/stats.h>

/* A validated, private copy of one process's segment. */
struct snapshot {
	struct roceshim_stats_header header;
	struct roceshim_stats_row *rows;
	unsigned int row_count;
	bool alive;
};

int segment_read(pid_t pid, struct snapshot *snap, bool quiet);
void segment_free(struct snapshot *snap);

/* The pids that have a segment, ascending; *out is the caller's to free. */
int segment_list_pids(pid_t **out);

void segment_path(pid_t pid, char *buf, size_t size);

/* Whether pid is the process that stamped start_ticks (0: any). */
bool segment_pid_alive(pid_t pid, uint64_t start_ticks);

#endif /* ROCESHIM_TOOLS_SEGMENT_H */
