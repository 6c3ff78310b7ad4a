/* SPDX-License-Identifier: MIT */
/*
 * Publishing the per-process statistics segment (layout in
 * <roceshim/stats.h>).
 *
 * Contract: the segment is created on first use, not at start-up, so that
 * processes that never open a TCP connection leave no trace.  Every
 * function here is a no-op when stats are off or the segment could not be
 * created; none of them fails its caller.  Counter updates are lock-free;
 * row allocation takes a mutex (once per connection).
 */
#ifndef ROCESHIM_STATS_INTERNAL_H
#define ROCESHIM_STATS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roceshim/stats.h>

/* Maps nothing: the segment appears with the first row opened. */
void stats_configure(bool enabled, unsigned int rows);

/*
 * Counts a new connection or listener in the global counters and gives it
 * a row.  A connection opened in state ROCESHIM_ROW_CONNECTING is not
 * counted yet: a connect that is refused makes no connection.  Returns the
 * row index, or -1 when stats are off or every row is in use by an open
 * connection (counted in rows_dropped).
 */
int stats_row_open(int fd, enum roceshim_role role,
		   enum roceshim_row_state state, enum roceshim_reason reason,
		   const struct roceshim_stats_endpoint *local,
		   const struct roceshim_stats_endpoint *peer);
/* Counts an active connection opened connecting, now established. */
void stats_count_connected(enum roceshim_reason reason);
void stats_row_set_state(int row, enum roceshim_row_state state);
/* A connect in the background decided its transport, for reason. */
void stats_row_set_reason(int row, enum roceshim_reason reason);
/* Its local address, which the kernel gave it as TCP connected. */
void stats_row_set_local(int row, const struct roceshim_stats_endpoint *local);
/* An upgraded connection moved to TCP (row may be -1). */
void stats_downgrade(int row, enum roceshim_downgrade cause);
void stats_row_close(int row);
/*
 * A fork child took over a connection it inherited: it publishes its
 * segment (the connection is now its own to show), and the row says TCP,
 * moved by the fork, when the owner moved it.
 */
void stats_row_claimed(int row, bool moved);

/* Data moved on the kernel TCP path or over RDMA; row may be -1. */
void stats_tcp_tx(int row, size_t bytes);
void stats_tcp_rx(int row, size_t bytes);
void stats_rdma_tx(int row, size_t bytes);
void stats_rdma_rx(int row, size_t bytes);
void stats_error(int row);
/* Hostile input from the network was refused. */
void stats_malformed_input(void);
/* A send on an upgraded connection found no credit. */
void stats_credit_stall(int row);

/*
 * Memory classes and the registration cache of pinned memory
 * (struct roceshim_stats_memory): bytes a call moved from or to a buffer
 * of class cls, and the cache's events.
 */
void stats_mem_bytes(bool tx, enum roceshim_mem_class cls, size_t bytes);
enum stats_mem_event {
	STATS_MEM_DEVICE_REFUSED,
	STATS_MEM_ZEROCOPY_TX, /* n: bytes */
	STATS_MEM_REGISTRATION,
	STATS_MEM_REGISTRATION_HIT,
	STATS_MEM_REGISTRATION_STALE,
	STATS_MEM_EVICTION,
	STATS_MEM_REGISTRATION_FAILURE,
};
void stats_mem_event(enum stats_mem_event ev, uint64_t n);
/* Registered bytes of pinned memory grew (or shrank, delta < 0). */
void stats_mem_registered(int64_t delta);

/*
 * An RDMA connection's rings changed (transport.h): the process's pinned
 * bytes change by pinned_delta, the row (may be -1) shows the sizes now,
 * and a resize is counted.  false: no segment took it (none yet).
 */
enum stats_ring_event {
	STATS_RING_CHANGED,
	STATS_RING_GREW,
	STATS_RING_SHRANK,
	STATS_RING_REFUSED
};
struct stats_ring_sizes {
	uint32_t rx_bytes;
	uint32_t tx_bytes;
	uint64_t pinned_bytes;
};
bool stats_rings(int row, enum stats_ring_event ev, int64_t pinned_delta,
		 const struct stats_ring_sizes *now);

/* The segment, or NULL; for tests and the fork handlers. */
struct roceshim_stats_header *stats_segment(void);

void stats_fork_prepare(void);
void stats_fork_parent(void);
/*
 * The child publishes its own segment, starting from the parent's rows,
 * without their rings (the owners hold those).
 */
void stats_fork_child(void);
/*
 * Removes the segment's name (at exit), taking the lock by deadline_ms
 * (of clock_ms(); lock_by.h), or waiting for it if negative.
 */
void stats_shutdown(int64_t deadline_ms);

#endif /* ROCESHIM_STATS_INTERNAL_H */
