// SPDX-License-Identifier: MIT
/*
 * An open-addressed table on the stack (4 KiB), from data.u64 to the
 * folded event, at most half full: an event loop's epoll_wait may return
 * thousands of events, and comparing each with every one kept before it
 * would cost their square.
 */
#include <stdint.h>
#include <string.h>

#include "event_fold.h"

#define SLOT_BITS 11
#define SLOTS	  (1u << SLOT_BITS)
_Static_assert(SLOTS == 2 * EVENT_FOLD_HASHED, "the table is half full");

/* Below this, comparing with each one kept costs less than the table. */
#define SCAN_MAX 8

static unsigned int slot_of(uint64_t data)
{
	/* Fibonacci hashing: datas are often pointers or small integers. */
	return (unsigned int)((data * 0x9e3779b97f4a7c15ull) >>
			      (64 - SLOT_BITS));
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
	int i, j, out = 0, hashed = 0;
	unsigned int s;

	if (n <= SCAN_MAX) {
		for (i = 0; i < n; i++) {
			j = scan(events, 0, out, events[i].data.u64);
			if (j >= 0)
				events[j].events |= events[i].events;
			else
				events[out++] = events[i];
		}
		return n > 0 ? out : n;
	}
	memset(slots, 0, sizeof(slots));
	for (i = 0; i < n; i++) {
		uint64_t data = events[i].data.u64;

		for (s = slot_of(data); slots[s]; s = (s + 1) & (SLOTS - 1))
			if (events[slots[s] - 1].data.u64 == data)
				break;
		j = slots[s] ? slots[s] - 1 : scan(events, hashed, out, data);
		if (j >= 0) {
			events[j].events |= events[i].events;
			continue;
		}
		events[out] = events[i];
		/* Kept in order, so the hashed ones are events[0..hashed). */
		if (hashed == out && hashed < EVENT_FOLD_HASHED) {
			slots[s] = (uint16_t)(out + 1);
			hashed++;
		}
		out++;
	}
	return out;
}
