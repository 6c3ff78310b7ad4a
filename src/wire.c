// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "ring.h"
#include "wire.h"

/*
 * hello:  0 magic(4) 4 version(1) 5 family(1) 6 tcp port(2) 8 address(16)
 *        24 ring addr(8) 32 ring rkey(4) 36 ring size(4) 40 flags(1)
 *        41 zero(7)
 * accept: 0 magic(4) 4 version(1) 5 zero(3) 8 ring addr(8) 16 rkey(4)
 *        20 ring size(4)
 * marker: 0 magic(4) 4 version(1) 5 cause(1) 6 zero(2) 8 resume(8)
 *        16 sent(8) 24 zero(8)
 * Family on the wire: 4 or 6, not the host's AF_* numbers.
 */

#define WIRE_HELLO_CONNECTED 0x01

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void put_ring(uint8_t *p, const struct transport_ring_info *ring)
{
	put64(p, ring->addr);
	put32(p + 8, ring->rkey);
	put32(p + 12, ring->size);
}

static int get_ring(const uint8_t *p, struct transport_ring_info *ring)
{
	ring->addr = get64(p);
	ring->rkey = get32(p + 8);
	ring->size = get32(p + 12);
	return ring_size_valid(ring->size) ? 0 : -EPROTO;
}

static int check_header(const uint8_t *p, size_t len, size_t want)
{
	if (len < want || get32(p) != WIRE_MAGIC || p[4] != WIRE_VERSION)
		return -EPROTO;
	return 0;
}

void wire_encode_hello(const struct wire_hello *hello,
		       uint8_t buf[WIRE_HELLO_LEN])
{
	memset(buf, 0, WIRE_HELLO_LEN);
	put32(buf, WIRE_MAGIC);
	buf[4] = WIRE_VERSION;
	buf[5] = hello->tcp_source.family == AF_INET ? 4 : 6;
	put16(buf + 6, hello->tcp_source.port);
	memcpy(buf + 8, hello->tcp_source.addr, 16);
	put_ring(buf + 24, &hello->ring);
	buf[40] = hello->connected ? WIRE_HELLO_CONNECTED : 0;
}

int wire_decode_hello(const void *data, size_t len, struct wire_hello *hello)
{
	const uint8_t *p = data;

	memset(hello, 0, sizeof(*hello));
	if (!p || check_header(p, len, WIRE_HELLO_LEN))
		return -EPROTO;
	if (p[5] == 4)
		hello->tcp_source.family = AF_INET;
	else if (p[5] == 6)
		hello->tcp_source.family = AF_INET6;
	else
		return -EPROTO;
	hello->tcp_source.port = get16(p + 6);
	memcpy(hello->tcp_source.addr, p + 8, 16);
	if (!hello->tcp_source.port || (p[40] & ~WIRE_HELLO_CONNECTED))
		return -EPROTO;
	hello->connected = p[40] & WIRE_HELLO_CONNECTED;
	return get_ring(p + 24, &hello->ring);
}

void wire_encode_accept(const struct transport_ring_info *ring,
			uint8_t buf[WIRE_ACCEPT_LEN])
{
	memset(buf, 0, WIRE_ACCEPT_LEN);
	put32(buf, WIRE_MAGIC);
	buf[4] = WIRE_VERSION;
	put_ring(buf + 8, ring);
}

int wire_decode_accept(const void *data, size_t len,
		       struct transport_ring_info *ring)
{
	const uint8_t *p = data;

	memset(ring, 0, sizeof(*ring));
	if (!p || check_header(p, len, WIRE_ACCEPT_LEN))
		return -EPROTO;
	return get_ring(p + 8, ring);
}

void wire_encode_reject(enum roceshim_reason reason,
			uint8_t buf[WIRE_REJECT_LEN])
{
	memset(buf, 0, WIRE_REJECT_LEN);
	put32(buf, WIRE_MAGIC);
	buf[4] = WIRE_VERSION;
	buf[5] = (uint8_t)reason;
}

int wire_decode_reject(const void *data, size_t len,
		       enum roceshim_reason *reason)
{
	const uint8_t *p = data;

	*reason = ROCESHIM_REASON_PEER_REJECTED;
	if (!p || check_header(p, len, WIRE_REJECT_LEN))
		return -EPROTO;
	switch (p[5]) {
	case ROCESHIM_REASON_FD_LIMIT:
	case ROCESHIM_REASON_MEMLOCK_LIMIT:
	case ROCESHIM_REASON_RESOURCE:
	case ROCESHIM_REASON_PREFORK:
	case ROCESHIM_REASON_HANDOFF:
	case ROCESHIM_REASON_REUSEPORT:
		*reason = p[5];
		return 0;
	default:
		return -EPROTO;
	}
}

void wire_encode_marker(const struct wire_marker *m,
			uint8_t buf[WIRE_MARKER_LEN])
{
	memset(buf, 0, WIRE_MARKER_LEN);
	put32(buf, WIRE_MARKER_MAGIC);
	buf[4] = WIRE_VERSION;
	buf[5] = m->cause;
	put64(buf + 8, m->resume);
	put64(buf + 16, m->sent);
}

int wire_decode_marker(const void *data, size_t len, struct wire_marker *m)
{
	const uint8_t *p = data;

	memset(m, 0, sizeof(*m));
	if (!p || len < WIRE_MARKER_LEN || get32(p) != WIRE_MARKER_MAGIC ||
	    p[4] != WIRE_VERSION || get16(p + 6) || get64(p + 24))
		return -EPROTO;
	m->cause = p[5];
	m->resume = get64(p + 8);
	m->sent = get64(p + 16);
	return 0;
}

int wire_marker_resend_from(const struct wire_marker *peer,
			    const struct wire_positions *mine, uint64_t *from)
{
	/*
	 * The peer may resume only where this end still has the bytes: not
	 * before what it said it consumed (the credit it returned), not
	 * after what this end sent.  And it cannot have sent less than this
	 * end consumed of its stream.
	 */
	if (peer->resume < mine->released || peer->resume > mine->staged ||
	    peer->sent < mine->consumed)
		return -EPROTO;
	*from = peer->resume;
	return 0;
}
