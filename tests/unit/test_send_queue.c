// SPDX-License-Identifier: MIT
/* Specification of the send queue (src/send_queue.c): the bytes past the
 * ring's credit, first in first out, within a bound, in chunks that come
 * and go with them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "send_queue.h"

#define BIG (3 * SEND_QUEUE_CHUNK + 123)

static uint8_t *pattern(size_t len, unsigned int seed)
{
	uint8_t *p = malloc(len);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 8));
	return p;
}

/* The queue's bytes from off on, up to len, gathered through its pieces. */
static size_t gather(const struct send_queue *q, size_t off, uint8_t *out,
		     size_t len)
{
	const uint8_t *p;
	size_t got = 0, n;

	while (got < len && (n = send_queue_piece(q, off + got, &p))) {
		if (n > len - got)
			n = len - got;
		memcpy(out + got, p, n);
		got += n;
	}
	return got;
}

static void pushed_bytes_come_out_in_order(void **state)
{
	struct send_queue q = { 0 };
	uint8_t *in = pattern(BIG, 1), *out = malloc(BIG);
	struct iovec iov = { in, BIG };

	assert_int_equal(send_queue_push(&q, &iov, 1, 0, SIZE_MAX), BIG);
	assert_int_equal(send_queue_len(&q), BIG);
	assert_int_equal(gather(&q, 0, out, BIG), BIG);
	assert_memory_equal(in, out, BIG);
	send_queue_clear(&q);
	free(in);
	free(out);
}

static void push_takes_no_more_than_the_bound(void **state)
{
	struct send_queue q = { 0 };
	uint8_t *in = pattern(BIG, 2);
	struct iovec iov = { in, BIG };

	assert_int_equal(send_queue_push(&q, &iov, 1, 0, 1000), 1000);
	assert_int_equal(send_queue_push(&q, &iov, 1, 0, 1000), 0);
	assert_int_equal(send_queue_len(&q), 1000);
	send_queue_clear(&q);
	free(in);
}

static void push_starts_after_skip_across_buffers(void **state)
{
	struct send_queue q = { 0 };
	uint8_t a[10], b[20], out[25];
	struct iovec iov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	assert_int_equal(send_queue_push(&q, iov, 2, 5, SIZE_MAX), 25);
	assert_int_equal(gather(&q, 0, out, sizeof(out)), 25);
	assert_memory_equal(out, "aaaaa", 5);
	assert_int_equal(out[5], 'b');
	assert_int_equal(out[24], 'b');
	send_queue_clear(&q);
}

static void drop_removes_bytes_from_the_front(void **state)
{
	struct send_queue q = { 0 };
	uint8_t *in = pattern(BIG, 3), *out = malloc(BIG);
	struct iovec iov = { in, BIG };
	size_t drop = SEND_QUEUE_CHUNK + 7;

	send_queue_push(&q, &iov, 1, 0, SIZE_MAX);
	send_queue_drop(&q, drop);
	assert_int_equal(send_queue_len(&q), BIG - drop);
	assert_int_equal(gather(&q, 0, out, BIG), BIG - drop);
	assert_memory_equal(in + drop, out, BIG - drop);
	send_queue_clear(&q);
	free(in);
	free(out);
}

static void a_piece_starts_at_its_offset(void **state)
{
	struct send_queue q = { 0 };
	uint8_t *in = pattern(BIG, 4);
	struct iovec iov = { in, BIG };
	const uint8_t *p;
	size_t off = 2 * SEND_QUEUE_CHUNK - 5;

	send_queue_push(&q, &iov, 1, 0, SIZE_MAX);
	assert_int_equal(send_queue_piece(&q, off, &p), 5);
	assert_memory_equal(p, in + off, 5);
	assert_int_equal(send_queue_piece(&q, BIG, &p), 0);
	send_queue_clear(&q);
	free(in);
}

static void bytes_pushed_after_a_drop_follow_the_rest(void **state)
{
	struct send_queue q = { 0 };
	uint8_t *in = pattern(BIG, 5), *out = malloc(BIG);
	struct iovec first = { in, 1000 }, rest = { in + 1000, BIG - 1000 };

	send_queue_push(&q, &first, 1, 0, SIZE_MAX);
	send_queue_drop(&q, 600);
	send_queue_push(&q, &rest, 1, 0, SIZE_MAX);
	assert_int_equal(gather(&q, 0, out, BIG), BIG - 600);
	assert_memory_equal(in + 600, out, BIG - 600);
	send_queue_clear(&q);
	free(in);
	free(out);
}

static void an_emptied_queue_holds_no_memory(void **state)
{
	struct send_queue q = { 0 };
	uint8_t *in = pattern(BIG, 6);
	struct iovec iov = { in, BIG };

	send_queue_push(&q, &iov, 1, 0, SIZE_MAX);
	send_queue_drop(&q, BIG);
	assert_int_equal(send_queue_len(&q), 0);
	assert_null(q.head);
	assert_null(q.tail);
	send_queue_push(&q, &iov, 1, 0, 10);
	assert_int_equal(send_queue_len(&q), 10);
	send_queue_clear(&q);
	free(in);
}

static void dropping_more_than_queued_empties_it(void **state)
{
	struct send_queue q = { 0 };
	uint8_t byte = 1;
	struct iovec iov = { &byte, 1 };

	send_queue_push(&q, &iov, 1, 0, SIZE_MAX);
	send_queue_drop(&q, 5);
	assert_int_equal(send_queue_len(&q), 0);
	assert_null(q.head);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pushed_bytes_come_out_in_order),
		cmocka_unit_test(push_takes_no_more_than_the_bound),
		cmocka_unit_test(push_starts_after_skip_across_buffers),
		cmocka_unit_test(drop_removes_bytes_from_the_front),
		cmocka_unit_test(a_piece_starts_at_its_offset),
		cmocka_unit_test(bytes_pushed_after_a_drop_follow_the_rest),
		cmocka_unit_test(an_emptied_queue_holds_no_memory),
		cmocka_unit_test(dropping_more_than_queued_empties_it),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
