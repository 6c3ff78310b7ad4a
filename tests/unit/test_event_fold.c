// SPDX-License-Identifier: MIT
/*
 * Specification of the folding of epoll events that share an epoll_data
 * (src/event_fold.c): one event per data, in the order of first
 * occurrence, with the union of the masks, at any count of events.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "event_fold.h"

static struct epoll_event event(uint32_t events, uint64_t data)
{
	return (struct epoll_event){ .events = events, .data.u64 = data };
}

/*
 * The folding by its definition: for each event, the first kept one with
 * its data, compared one by one.
 */
static int fold_by_definition(struct epoll_event *events, int n)
{
	int i, j, out = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < out; j++)
			if (events[j].data.u64 == events[i].data.u64)
				break;
		if (j < out)
			events[j].events |= events[i].events;
		else
			events[out++] = events[i];
	}
	return out;
}

static void assert_same_events(const struct epoll_event *a,
			       const struct epoll_event *b, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		assert_int_equal(a[i].events, b[i].events);
		assert_true(a[i].data.u64 == b[i].data.u64);
	}
}

static void an_error_or_no_event_is_returned_as_it_is(void **state)
{
	struct epoll_event ev[1] = { event(EPOLLIN, 7) };

	(void)state;
	assert_int_equal(event_fold(ev, -1), -1);
	assert_int_equal(event_fold(ev, 0), 0);
	assert_int_equal(ev[0].events, EPOLLIN);
}

static void distinct_datas_are_left_in_their_order(void **state)
{
	struct epoll_event ev[3] = { event(EPOLLIN, 3), event(EPOLLOUT, 1),
				     event(EPOLLHUP, 2) };

	(void)state;
	assert_int_equal(event_fold(ev, 3), 3);
	assert_true(ev[0].data.u64 == 3 && ev[0].events == EPOLLIN);
	assert_true(ev[1].data.u64 == 1 && ev[1].events == EPOLLOUT);
	assert_true(ev[2].data.u64 == 2 && ev[2].events == EPOLLHUP);
}

static void entries_of_one_connection_become_one_event(void **state)
{
	struct epoll_event ev[4] = { event(EPOLLRDNORM, 9), event(EPOLLIN, 9),
				     event(EPOLLIN, 4), event(EPOLLOUT, 9) };

	(void)state;
	assert_int_equal(event_fold(ev, 4), 2);
	assert_true(ev[0].data.u64 == 9);
	assert_int_equal(ev[0].events, EPOLLRDNORM | EPOLLIN | EPOLLOUT);
	assert_true(ev[1].data.u64 == 4 && ev[1].events == EPOLLIN);
}

/*
 * An event loop's wait over thousands of upgraded connections: more
 * distinct datas than the table holds, each in up to four entries, the
 * entries of one connection far apart, and datas that differ only in
 * their high bits (pointers).
 */
static void thousands_of_events_fold_as_by_definition(void **state)
{
	enum {
		CONNS = 3000,
		MAX = 4 * CONNS
	};
	struct epoll_event *ev = calloc(MAX, sizeof(*ev));
	struct epoll_event *want = calloc(MAX, sizeof(*want));
	static const uint32_t entry[] = { EPOLLIN, EPOLLOUT, EPOLLRDNORM,
					  EPOLLHUP };
	unsigned int seed = 1;
	int i, n = 0, folded;

	(void)state;
	assert_non_null(ev);
	assert_non_null(want);
	for (i = 0; i < MAX; i++) {
		uint64_t conn;

		seed = seed * 1103515245u + 12345u;
		conn = (seed >> 8) % CONNS;
		if ((seed >> 4) & 1)
			continue;
		ev[n++] = event(entry[(seed >> 20) & 3],
				(conn << 48) | 0x7f0000001000ull);
	}
	for (i = 0; i < n; i++)
		want[i] = ev[i];
	folded = fold_by_definition(want, n);
	assert_true(folded > EVENT_FOLD_HASHED);
	assert_int_equal(event_fold(ev, n), folded);
	assert_same_events(ev, want, folded);
	free(ev);
	free(want);
}

/*
 * Around the scan's limit and the table's: each data twice, the second
 * time in reverse order.
 */
static void counts_at_each_limit_fold_as_by_definition(void **state)
{
	enum {
		MAX = EVENT_FOLD_HASHED + 2
	};
	static const int counts[] = { 1,
				      2,
				      8,
				      9,
				      EVENT_FOLD_HASHED - 1,
				      EVENT_FOLD_HASHED,
				      EVENT_FOLD_HASHED + 1,
				      MAX };
	static struct epoll_event ev[2 * MAX], want[2 * MAX];
	unsigned int k;
	int distinct, i, n;

	(void)state;
	for (k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		distinct = counts[k];
		n = 0;
		for (i = 0; i < distinct; i++)
			ev[n++] = event(EPOLLIN, (uint64_t)i * 8);
		for (i = distinct - 1; i >= 0; i--)
			ev[n++] = event(EPOLLOUT, (uint64_t)i * 8);
		for (i = 0; i < n; i++)
			want[i] = ev[i];
		assert_int_equal(event_fold(ev, n), distinct);
		assert_int_equal(fold_by_definition(want, n), distinct);
		assert_same_events(ev, want, distinct);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(an_error_or_no_event_is_returned_as_it_is),
		cmocka_unit_test(distinct_datas_are_left_in_their_order),
		cmocka_unit_test(entries_of_one_connection_become_one_event),
		cmocka_unit_test(thousands_of_events_fold_as_by_definition),
		cmocka_unit_test(counts_at_each_limit_fold_as_by_definition),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
