// SPDX-License-Identifier: MIT
/*
 * An open-addressed table on the stack (sized to the count, up to 4 KiB)
 * from data.u64 to the folded event, at most half full: an event loop's
 * epoll_wait may return thousands of events, and comparing each with
 * every one kept before it would cost their square.
 */
#include <stdint.h>
#include <string.h>

#include "event_fold.h"

#define SLOT_BITS 11
#define SLOTS	  (1u << SLOT_BITS)
_Static_assert(SLOTS == 2 * EVENT_FOLD_HASHED, "the table is half full");

/* Below this, comparing with each one kept costs less than the table. */
#define SCAN_MAX 8

/* Of a table of 1 << bits slots. */
static unsigned int slot_of(uint64_t data, unsigned int bits)
{
	/* Fibonacci hashing: datas are often pointers or small integers. */
	return (unsigned int)((data * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* The fewest bits whose table holds n datas at most half full. */
static unsigned int bits_for(int n)
{
	unsigned int bits = 4;

	while (bits < SLOT_BITS && (1 << bits) < 2 * n)
		bits++;
	return bits;
}

/* The index in events[first..last) with data, or -1. */
static int scan(const struct epoll_event *events, int first, int last,
		uint64_t data)
{
	int j;

	for (j = first; j < last; j++)
		if (events[j].data.u64 == data)
			return j;
	return -1;
}

int event_fold(struct epoll_event *events, int n)
{
	/* An index into events plus one; 0 is an empty slot. */
	uint16_t slots[SLOTS];
	unsigned int s = 0, bits = bits_for(n), mask = (1u << bits) - 1;
	/* A few are compared one by one: cheaper than clearing a table. */
	int capacity = n > SCAN_MAX ? (int)(mask + 1) / 2 : 0;
	int i, j, out = 0, hashed = 0;

	if (capacity)
		memset(slots, 0, sizeof(slots[0]) << bits);
	for (i = 0; i < n; i++) {
		uint64_t data = events[i].data.u64;

		j = -1;
		if (capacity) {
			for (s = slot_of(data, bits); slots[s];
			     s = (s + 1) & mask)
				if (events[slots[s] - 1].data.u64 == data)
					break;
			j = slots[s] ? slots[s] - 1 : -1;
		}
		if (j < 0)
			j = scan(events, hashed, out, data);
		if (j >= 0) {
			events[j].events |= events[i].events;
			continue;
		}
		events[out] = events[i];
		/* Kept in order, so the hashed ones are events[0..hashed). */
		if (hashed == out && hashed < capacity) {
			slots[s] = (uint16_t)(out + 1);
			hashed++;
		}
		out++;
	}
	return n < 0 ? n : out;
}
