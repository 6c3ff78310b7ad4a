// SPDX-License-Identifier: MIT
/* Specification of the handshake's wire format (src/wire.c): round trips,
 * and refusal of every malformed or hostile private data. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "ring.h"
#include "wire.h"

static struct wire_hello sample_hello(int family)
{
	struct wire_hello h = {
		.tcp_source = { .port = 40123, .family = family },
		.ring = { .addr = 0x7f0012345000ull,
			  .rkey = 0xabcdef01,
			  .size = 256u << 10 },
	};

	for (int i = 0; i < 16; i++)
		h.tcp_source.addr[i] = (uint8_t)(i * 17 + 1);
	return h;
}

static void assert_same_hello(const struct wire_hello *a,
			      const struct wire_hello *b)
{
	assert_memory_equal(&a->tcp_source, &b->tcp_source,
			    sizeof(a->tcp_source));
	assert_memory_equal(&a->ring, &b->ring, sizeof(a->ring));
	assert_int_equal(a->connected, b->connected);
}

static void hello_round_trips_for_ipv4_and_ipv6(void **state)
{
	int families[] = { AF_INET, AF_INET6 };

	for (int i = 0; i < 2; i++) {
		struct wire_hello in = sample_hello(families[i]), out;
		uint8_t buf[WIRE_HELLO_LEN];

		wire_encode_hello(&in, buf);
		assert_int_equal(wire_decode_hello(buf, sizeof(buf), &out), 0);
		assert_same_hello(&in, &out);
	}
}

static void hello_says_whether_its_tcp_connection_is_up(void **state)
{
	struct wire_hello in = sample_hello(AF_INET), out;
	uint8_t buf[WIRE_HELLO_LEN];

	for (int connected = 0; connected < 2; connected++) {
		in.connected = connected;
		wire_encode_hello(&in, buf);
		assert_int_equal(wire_decode_hello(buf, sizeof(buf), &out), 0);
		assert_same_hello(&in, &out);
	}
}

static void accept_round_trips(void **state)
{
	struct transport_ring_info in = { 0x1000, 7, RING_SIZE_MIN }, out;
	uint8_t buf[WIRE_ACCEPT_LEN];

	wire_encode_accept(&in, buf);
	assert_int_equal(wire_decode_accept(buf, sizeof(buf), &out), 0);
	assert_memory_equal(&in, &out, sizeof(in));
}

static void zero_padded_private_data_is_accepted(void **state)
{
	struct wire_hello in = sample_hello(AF_INET6), out;
	uint8_t buf[56] = { 0 };

	wire_encode_hello(&in, buf);
	assert_int_equal(wire_decode_hello(buf, sizeof(buf), &out), 0);
}

static void hello_refused_when(void (*spoil)(uint8_t *buf), size_t len)
{
	struct wire_hello in = sample_hello(AF_INET), out;
	uint8_t buf[WIRE_HELLO_LEN];

	wire_encode_hello(&in, buf);
	if (spoil)
		spoil(buf);
	assert_int_equal(wire_decode_hello(buf, len, &out), -EPROTO);
}

static void bad_magic(uint8_t *b)
{
	b[0] ^= 1;
}

static void bad_version(uint8_t *b)
{
	b[4] = WIRE_VERSION + 1;
}

static void bad_family(uint8_t *b)
{
	b[5] = 5;
}

static void zero_port(uint8_t *b)
{
	b[6] = b[7] = 0;
}

static void ring_not_power_of_two(uint8_t *b)
{
	b[38] = 0x12;
}

static void ring_too_small(uint8_t *b)
{
	memset(b + 36, 0, 4);
	b[38] = 0x08; /* 2048 */
}

static void ring_too_large(uint8_t *b)
{
	memset(b + 36, 0, 4);
	b[36] = 0x40; /* 2^30 */
}

static void unknown_flag(uint8_t *b)
{
	b[40] |= 0x80;
}

static void malformed_hellos_are_refused(void **state)
{
	hello_refused_when(NULL, WIRE_HELLO_LEN - 1);
	hello_refused_when(NULL, 0);
	hello_refused_when(bad_magic, WIRE_HELLO_LEN);
	hello_refused_when(bad_version, WIRE_HELLO_LEN);
	hello_refused_when(bad_family, WIRE_HELLO_LEN);
	hello_refused_when(zero_port, WIRE_HELLO_LEN);
	hello_refused_when(ring_not_power_of_two, WIRE_HELLO_LEN);
	hello_refused_when(ring_too_small, WIRE_HELLO_LEN);
	hello_refused_when(ring_too_large, WIRE_HELLO_LEN);
	hello_refused_when(unknown_flag, WIRE_HELLO_LEN);
}

static void missing_private_data_is_refused(void **state)
{
	struct transport_ring_info ring;
	struct wire_hello hello;

	assert_int_equal(wire_decode_hello(NULL, 56, &hello), -EPROTO);
	assert_int_equal(wire_decode_accept(NULL, 56, &ring), -EPROTO);
}

static void short_or_foreign_accept_is_refused(void **state)
{
	struct transport_ring_info in = { 1, 2, RING_SIZE_MIN }, out;
	uint8_t buf[WIRE_ACCEPT_LEN];

	wire_encode_accept(&in, buf);
	assert_int_equal(wire_decode_accept(buf, WIRE_ACCEPT_LEN - 1, &out),
			 -EPROTO);
	buf[1] ^= 0x80;
	assert_int_equal(wire_decode_accept(buf, WIRE_ACCEPT_LEN, &out),
			 -EPROTO);
}

static void resource_refusal_carries_its_reason(void **state)
{
	enum roceshim_reason reason;
	uint8_t buf[WIRE_REJECT_LEN];

	wire_encode_reject(ROCESHIM_REASON_FD_LIMIT, buf);
	assert_int_equal(wire_decode_reject(buf, sizeof(buf), &reason), 0);
	assert_int_equal(reason, ROCESHIM_REASON_FD_LIMIT);
	wire_encode_reject(ROCESHIM_REASON_MEMLOCK_LIMIT, buf);
	assert_int_equal(wire_decode_reject(buf, sizeof(buf), &reason), 0);
	assert_int_equal(reason, ROCESHIM_REASON_MEMLOCK_LIMIT);
}

static void prefork_refusal_carries_its_reason(void **state)
{
	enum roceshim_reason reason;
	uint8_t buf[WIRE_REJECT_LEN];

	wire_encode_reject(ROCESHIM_REASON_PREFORK, buf);
	assert_int_equal(wire_decode_reject(buf, sizeof(buf), &reason), 0);
	assert_int_equal(reason, ROCESHIM_REASON_PREFORK);
}

static void handoff_refusal_carries_its_reason(void **state)
{
	enum roceshim_reason reason;
	uint8_t buf[WIRE_REJECT_LEN];

	wire_encode_reject(ROCESHIM_REASON_HANDOFF, buf);
	assert_int_equal(wire_decode_reject(buf, sizeof(buf), &reason), 0);
	assert_int_equal(reason, ROCESHIM_REASON_HANDOFF);
}

static void reuseport_refusal_carries_its_reason(void **state)
{
	enum roceshim_reason reason;
	uint8_t buf[WIRE_REJECT_LEN];

	wire_encode_reject(ROCESHIM_REASON_REUSEPORT, buf);
	assert_int_equal(wire_decode_reject(buf, sizeof(buf), &reason), 0);
	assert_int_equal(reason, ROCESHIM_REASON_REUSEPORT);
}

static void refusal_with_another_reason_is_a_plain_refusal(void **state)
{
	enum roceshim_reason reason;
	uint8_t buf[WIRE_REJECT_LEN];

	wire_encode_reject(ROCESHIM_REASON_NONE, buf);
	assert_int_equal(wire_decode_reject(buf, sizeof(buf), &reason),
			 -EPROTO);
	assert_int_equal(reason, ROCESHIM_REASON_PEER_REJECTED);
	buf[5] = 200;
	assert_int_equal(wire_decode_reject(buf, sizeof(buf), &reason),
			 -EPROTO);
	assert_int_equal(reason, ROCESHIM_REASON_PEER_REJECTED);
}

static void refusal_without_data_is_a_plain_refusal(void **state)
{
	enum roceshim_reason reason;
	uint8_t zeros[WIRE_REJECT_LEN] = { 0 };

	assert_int_equal(wire_decode_reject(NULL, 0, &reason), -EPROTO);
	assert_int_equal(wire_decode_reject(zeros, sizeof(zeros), &reason),
			 -EPROTO);
	assert_int_equal(reason, ROCESHIM_REASON_PEER_REJECTED);
}

/* Random bytes, random lengths, some with a valid header: never a crash,
 * and whatever is accepted is within bounds. */
static void random_private_data_is_refused_or_sane(void **state)
{
	unsigned int seed = 777, accepted = 0;
	uint8_t buf[64];

	for (int i = 0; i < 100000; i++) {
		size_t len = rand_r(&seed) % sizeof(buf);
		struct transport_ring_info ring;
		struct wire_hello hello;

		for (size_t j = 0; j < sizeof(buf); j++)
			buf[j] = rand_r(&seed);
		if (i % 2) {
			buf[0] = 0x52, buf[1] = 0x53, buf[2] = 0x48,
			buf[3] = 0x31, buf[4] = WIRE_VERSION;
			buf[5] = i % 3 ? 4 : 6;
		}
		if (!wire_decode_hello(buf, len, &hello)) {
			accepted++;
			assert_true(ring_size_valid(hello.ring.size));
			assert_true(hello.tcp_source.port != 0);
		}
		if (!wire_decode_accept(buf, len, &ring))
			assert_true(ring_size_valid(ring.size));
	}
	(void)accepted;
}

static void marker_round_trips(void **state)
{
	struct wire_marker in = { .resume = 0x0123456789abcdefull,
				  .sent = 0xfedcba9876543210ull,
				  .cause = 7 },
			   out;
	uint8_t buf[WIRE_MARKER_LEN];

	wire_encode_marker(&in, buf);
	assert_int_equal(wire_decode_marker(buf, sizeof(buf), &out), 0);
	assert_true(out.resume == in.resume && out.sent == in.sent &&
		    out.cause == in.cause);
}

static void short_foreign_or_dirty_marker_is_refused(void **state)
{
	struct wire_marker m = { .resume = 10, .sent = 20 }, out;
	uint8_t buf[WIRE_MARKER_LEN];

	wire_encode_marker(&m, buf);
	assert_int_equal(wire_decode_marker(buf, WIRE_MARKER_LEN - 1, &out),
			 -EPROTO);
	assert_int_equal(wire_decode_marker(NULL, WIRE_MARKER_LEN, &out),
			 -EPROTO);
	buf[0] ^= 1;
	assert_int_equal(wire_decode_marker(buf, sizeof(buf), &out), -EPROTO);
	buf[0] ^= 1;
	buf[4] = WIRE_VERSION + 1;
	assert_int_equal(wire_decode_marker(buf, sizeof(buf), &out), -EPROTO);
	buf[4] = WIRE_VERSION;
	buf[30] = 1; /* reserved bytes must be zero */
	assert_int_equal(wire_decode_marker(buf, sizeof(buf), &out), -EPROTO);
}

static void a_hello_is_not_a_marker(void **state)
{
	struct wire_hello h = sample_hello(AF_INET);
	uint8_t buf[WIRE_HELLO_LEN];
	struct wire_marker out;

	wire_encode_hello(&h, buf);
	assert_int_equal(wire_decode_marker(buf, sizeof(buf), &out), -EPROTO);
}

static void resend_starts_where_the_peer_resumes(void **state)
{
	struct wire_positions mine = { .consumed = 500,
				       .released = 1000,
				       .staged = 3000 };
	struct wire_marker peer = { .resume = 1200, .sent = 500 };
	uint64_t from = 0;

	assert_int_equal(wire_marker_resend_from(&peer, &mine, &from), 0);
	assert_int_equal(from, 1200);
	peer.resume = mine.released;
	assert_int_equal(wire_marker_resend_from(&peer, &mine, &from), 0);
	assert_int_equal(from, 1000);
	peer.resume = mine.staged;
	assert_int_equal(wire_marker_resend_from(&peer, &mine, &from), 0);
	assert_int_equal(from, 3000);
}

static void resume_outside_what_this_end_holds_is_refused(void **state)
{
	struct wire_positions mine = { .consumed = 500,
				       .released = 1000,
				       .staged = 3000 };
	struct wire_marker peer = { .resume = 999, .sent = 800 };
	uint64_t from = 77;

	/* Before the credit it returned: those bytes are gone here. */
	assert_int_equal(wire_marker_resend_from(&peer, &mine, &from), -EPROTO);
	/* Past what this end ever sent. */
	peer.resume = 3001;
	assert_int_equal(wire_marker_resend_from(&peer, &mine, &from), -EPROTO);
	/* The peer sent less than this end already read of it. */
	peer.resume = 2000;
	peer.sent = 499;
	assert_int_equal(wire_marker_resend_from(&peer, &mine, &from), -EPROTO);
	assert_int_equal(from, 77);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hello_round_trips_for_ipv4_and_ipv6),
		cmocka_unit_test(hello_says_whether_its_tcp_connection_is_up),
		cmocka_unit_test(accept_round_trips),
		cmocka_unit_test(zero_padded_private_data_is_accepted),
		cmocka_unit_test(malformed_hellos_are_refused),
		cmocka_unit_test(missing_private_data_is_refused),
		cmocka_unit_test(short_or_foreign_accept_is_refused),
		cmocka_unit_test(random_private_data_is_refused_or_sane),
		cmocka_unit_test(marker_round_trips),
		cmocka_unit_test(short_foreign_or_dirty_marker_is_refused),
		cmocka_unit_test(a_hello_is_not_a_marker),
		cmocka_unit_test(resource_refusal_carries_its_reason),
		cmocka_unit_test(prefork_refusal_carries_its_reason),
		cmocka_unit_test(handoff_refusal_carries_its_reason),
		cmocka_unit_test(reuseport_refusal_carries_its_reason),
		cmocka_unit_test(
			refusal_with_another_reason_is_a_plain_refusal),
		cmocka_unit_test(refusal_without_data_is_a_plain_refusal),
		cmocka_unit_test(resend_starts_where_the_peer_resumes),
		cmocka_unit_test(resume_outside_what_this_end_holds_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
