/* SPDX-License-Identifier: MIT */
/*
 * Byte-ring arithmetic shared by both ends of an RDMA connection.
 *
 * Positions are 64-bit byte counts that only grow (they never wrap in a
 * connection's lifetime); the offset in a ring of `size` bytes (a power of
 * two) is position & (size - 1).  A writer may fill a ring up to `size`
 * bytes beyond the last position the reader has released.
 */
#ifndef ROCESHIM_RING_H
#define ROCESHIM_RING_H

#include <stdbool.h>
#include <stdint.h>

#define RING_SIZE_MIN (4u << 10)
/* Below 2^30: lengths and credits travel in 30 bits of an immediate. */
#define RING_SIZE_MAX (1u << 29)

static inline bool ring_size_valid(uint64_t size)
{
	return size >= RING_SIZE_MIN && size <= RING_SIZE_MAX &&
	       !(size & (size - 1));
}

static inline uint32_t ring_offset(uint64_t pos, uint32_t size)
{
	return (uint32_t)(pos & (size - 1));
}

/* Bytes a writer at `tail` may still add before reaching `released`. */
static inline uint64_t ring_free(uint64_t tail, uint64_t released,
				 uint32_t size)
{
	return size - (tail - released);
}

/* Of `len` bytes starting at `pos`, how many fit before the ring's end. */
static inline uint32_t ring_contiguous(uint64_t pos, uint64_t len,
				       uint32_t size)
{
	uint32_t room = size - ring_offset(pos, size);

	return len < room ? (uint32_t)len : room;
}

#endif /* ROCESHIM_RING_H */
