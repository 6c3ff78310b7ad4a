// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "send_queue.h"

struct send_queue_chunk {
	struct send_queue_chunk *next;
	uint8_t bytes[SEND_QUEUE_CHUNK];
};

/* A tail with room, or NULL when memory ran out. */
static struct send_queue_chunk *tail_with_room(struct send_queue *q)
{
	struct send_queue_chunk *c;

	if (q->tail && q->tail_len < SEND_QUEUE_CHUNK)
		return q->tail;
	c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	c->next = NULL;
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	q->tail_len = 0;
	return c;
}

size_t send_queue_push(struct send_queue *q, const struct iovec *iov,
		       int iovcnt, size_t skip, size_t max)
{
	size_t room = max > q->len ? max - q->len : 0, taken = 0;
	int i;

	for (i = 0; i < iovcnt && taken < room; i++) {
		const uint8_t *src = iov[i].iov_base;
		size_t len = iov[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		src += skip;
		len -= skip;
		skip = 0;
		while (len && taken < room) {
			struct send_queue_chunk *c = tail_with_room(q);
			size_t n;

			if (!c)
				goto out;
			n = SEND_QUEUE_CHUNK - q->tail_len;
			if (n > len)
				n = len;
			if (n > room - taken)
				n = room - taken;
			memcpy(c->bytes + q->tail_len, src, n);
			q->tail_len += n;
			src += n;
			len -= n;
			taken += n;
		}
	}
out:
	q->len += taken;
	return taken;
}

size_t send_queue_piece(const struct send_queue *q, size_t off,
			const uint8_t **p)
{
	const struct send_queue_chunk *c = q->head;
	size_t start = q->head_off, end;

	if (off >= q->len)
		return 0;
	off += start;
	for (;;) {
		end = c == q->tail ? q->tail_len : SEND_QUEUE_CHUNK;
		if (off < end)
			break;
		off -= end;
		c = c->next;
	}
	*p = c->bytes + off;
	return end - off;
}

void send_queue_drop(struct send_queue *q, size_t n)
{
	if (n > q->len)
		n = q->len;
	q->len -= n;
	n += q->head_off;
	while (q->head) {
		size_t end =
			q->head == q->tail ? q->tail_len : SEND_QUEUE_CHUNK;
		struct send_queue_chunk *c = q->head;

		if (n < end && q->len) {
			q->head_off = n;
			return;
		}
		n -= end < n ? end : n;
		q->head = c->next;
		free(c);
	}
	q->tail = NULL;
	q->head_off = 0;
	q->tail_len = 0;
}

void send_queue_clear(struct send_queue *q)
{
	send_queue_drop(q, q->len);
}
