// SPDX-License-Identifier: MIT
/* Specification of the move to TCP (src/conn_move.c), both ends of one
 * connection at once: the markers, the offsets where each stream switches,
 * the bytes resent from the staging ring, and what happens when the peer
 * closes, resets or lies.  The kernel socket is a real loopback TCP
 * connection; the transport, the readiness and the process-wide modules
 * around the move are test doubles (-Wl,--wrap), so no verbs are needed.
 * The progress thread's part is played by calling the kernel event. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "conn_impl.h"
#include "real.h"
#include "transport.h"
#include "wire.h"

#define STREAM_MAX (1u << 20)

/* A transport double: one end's positions and the stream it staged. */
struct transport {
	struct wire_positions pos;
	bool frozen;
	bool unfrozen;
	bool peer_closed;
	bool peer_gone;
	bool read_to_fin; /* the peer's FIN came and all before it was read */
	uint8_t stream[STREAM_MAX]; /* this end's stream from position 0 */
};

struct end {
	struct conn c;
	struct transport t;
	int fd;
};

int __wrap_transport_freeze(struct transport *t, struct wire_positions *pos,
			    bool *tx_shut);
int __wrap_transport_staged_iov(struct transport *t, uint64_t from, uint64_t to,
				struct iovec iov[2]);
void __wrap_transport_unfreeze(struct transport *t);
void __wrap_transport_peer_closed(struct transport *t);
bool __wrap_transport_read_to_fin(struct transport *t);
void __wrap_transport_peer_gone(struct transport *t);
void __wrap_share_publish(struct share_slot *slot, enum share_state state);
enum share_state __wrap_share_state(const struct share_slot *slot);
void __wrap_readiness_release(struct readiness *r);
void __wrap_readiness_sync(struct readiness *r);
void __wrap_stats_downgrade(int row, enum roceshim_downgrade cause);
void __wrap_stats_malformed_input(void);
void __wrap_reg_cache_trim(struct reg_cache *rc);
void __wrap_progress_wake(void);
bool __wrap_conn_alive(const struct conn *c);
bool __wrap_readiness_alive(const struct readiness *r);
void __wrap_conn_watch_kernel_locked(struct conn *c, uint32_t events);

static enum share_state published;
static unsigned int malformed;
static unsigned int watched;

int __wrap_transport_freeze(struct transport *t, struct wire_positions *pos,
			    bool *tx_shut)
{
	*pos = t->pos;
	*tx_shut = false;
	if (t->frozen)
		return -EALREADY;
	t->frozen = true;
	return 0;
}

int __wrap_transport_staged_iov(struct transport *t, uint64_t from, uint64_t to,
				struct iovec iov[2])
{
	if (from > to || to > t->pos.staged || from < t->pos.released)
		return -EINVAL;
	iov[0].iov_base = t->stream + from;
	iov[0].iov_len = to - from;
	return 1;
}

void __wrap_transport_unfreeze(struct transport *t)
{
	t->frozen = false;
	t->unfrozen = true;
}

void __wrap_transport_peer_closed(struct transport *t)
{
	t->peer_closed = true;
}

bool __wrap_transport_read_to_fin(struct transport *t)
{
	return t->read_to_fin;
}

void __wrap_transport_peer_gone(struct transport *t)
{
	t->peer_gone = true;
}

void __wrap_share_publish(struct share_slot *slot, enum share_state state)
{
	(void)slot;
	published = state;
}

enum share_state __wrap_share_state(const struct share_slot *slot)
{
	(void)slot;
	return published;
}

void __wrap_readiness_release(struct readiness *r)
{
	(void)r;
}

void __wrap_readiness_sync(struct readiness *r)
{
	(void)r;
}

void __wrap_stats_downgrade(int row, enum roceshim_downgrade cause)
{
	(void)row;
	(void)cause;
}

void __wrap_stats_malformed_input(void)
{
	malformed++;
}

void __wrap_reg_cache_trim(struct reg_cache *rc)
{
	(void)rc;
}

void __wrap_progress_wake(void)
{
}

bool __wrap_conn_alive(const struct conn *c)
{
	(void)c;
	return true;
}

/* conn.c's own calls of conn_alive() ask the readiness. */
bool __wrap_readiness_alive(const struct readiness *r)
{
	(void)r;
	return true;
}

void __wrap_conn_watch_kernel_locked(struct conn *c, uint32_t events)
{
	(void)c;
	(void)events;
	watched++;
}

/* Two connected loopback TCP sockets. */
static void tcp_pair(int fds[2])
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int ls = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(ls, 1), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&sin, &len), 0);
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fds[0], (struct sockaddr *)&sin, sizeof(sin)),
			 0);
	fds[1] = accept(ls, NULL, NULL);
	assert_true(fds[1] >= 0);
	close(ls);
}

/* Byte i of end seed's stream. */
static uint8_t stream_byte(unsigned int seed, uint64_t i)
{
	return (uint8_t)(i * 7 + seed * 131 + (i >> 8));
}

static void end_init(struct end *e, int fd, unsigned int seed,
		     struct wire_positions pos)
{
	uint64_t i;

	memset(e, 0, sizeof(*e));
	e->fd = fd;
	e->t.pos = pos;
	for (i = 0; i < STREAM_MAX; i++)
		e->t.stream[i] = stream_byte(seed, i);
	e->c.t = &e->t;
	e->c.kfd = fd;
	e->c.row = -1;
	e->c.timeout_ms = 5000;
	e->c.path = CONN_RDMA;
	pthread_mutex_init(&e->c.lock, NULL);
	pthread_cond_init(&e->c.moved, NULL);
}

static enum conn_path path(const struct end *e)
{
	return __atomic_load_n(&e->c.path, __ATOMIC_ACQUIRE);
}

static void begin(struct end *e, enum roceshim_downgrade cause)
{
	pthread_mutex_lock(&e->c.lock);
	conn_move_begin_locked(&e->c, cause);
	pthread_mutex_unlock(&e->c.lock);
}

/* The progress thread's part: what the kernel socket has for e. */
static void kernel_event(struct end *e)
{
	struct pollfd pfd = { .fd = e->fd, .events = POLLIN | POLLRDHUP };

	assert_int_equal(poll(&pfd, 1, 2000), 1);
	pthread_mutex_lock(&e->c.lock);
	conn_move_kernel_event_locked(&e->c, EPOLLIN);
	pthread_mutex_unlock(&e->c.lock);
}

static bool flush(struct end *e)
{
	bool done;

	pthread_mutex_lock(&e->c.lock);
	done = conn_move_flush_locked(&e->c);
	pthread_mutex_unlock(&e->c.lock);
	return done;
}

static bool caught_up(struct end *e)
{
	bool done;

	pthread_mutex_lock(&e->c.lock);
	done = conn_move_caught_up_locked(&e->c, clock_ms());
	pthread_mutex_unlock(&e->c.lock);
	return done;
}

static void read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = recv(fd, (char *)buf + got, len - got, 0);
		assert_true(n > 0);
		got += (size_t)n;
	}
}

/* Reads the marker at the head of fd's stream. */
static struct wire_marker read_marker(int fd)
{
	uint8_t buf[WIRE_MARKER_LEN];
	struct wire_marker m;

	read_all(fd, buf, sizeof(buf));
	assert_int_equal(wire_decode_marker(buf, sizeof(buf), &m), 0);
	return m;
}

/* Reads n bytes from fd and checks they are end seed's [from, from + n). */
static void expect_stream(int fd, unsigned int seed, uint64_t from, size_t n)
{
	uint8_t buf[4096];
	size_t i, k;

	for (k = 0; k < n; k += sizeof(buf)) {
		size_t len = n - k < sizeof(buf) ? n - k : sizeof(buf);

		read_all(fd, buf, len);
		for (i = 0; i < len; i++)
			assert_int_equal(buf[i],
					 stream_byte(seed, from + k + i));
	}
}

/* Nothing more in fd for now. */
static void expect_nothing(int fd)
{
	char byte;

	assert_int_equal(recv(fd, &byte, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
}

static void reset_by(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)),
			 0);
	close(fd);
}

/*
 * End a has consumed 300 of b's stream and staged 200 of its own, of
 * which b acknowledged 50; b has consumed 120 of a's and staged 400.
 */
static const struct wire_positions a_pos = { .consumed = 300,
					     .released = 50,
					     .staged = 200 };
static const struct wire_positions b_pos = { .consumed = 120,
					     .released = 300,
					     .staged = 400 };

static int setup(void **state)
{
	static struct end ends[2];
	int fds[2];

	tcp_pair(fds);
	end_init(&ends[0], fds[0], 1, a_pos);
	end_init(&ends[1], fds[1], 2, b_pos);
	published = SHARE_RDMA;
	malformed = 0;
	watched = 0;
	*state = ends;
	return 0;
}

/* A move left waiting for a marker ends as one whose peer closed. */
static void end_move(struct end *e)
{
	if (path(e) != CONN_MOVING)
		return;
	shutdown(e->fd, SHUT_RD);
	pthread_mutex_lock(&e->c.lock);
	conn_move_kernel_event_locked(&e->c, EPOLLIN);
	pthread_mutex_unlock(&e->c.lock);
}

static int teardown(void **state)
{
	struct end *ends = *state;

	end_move(&ends[0]);
	end_move(&ends[1]);
	close(ends[0].fd);
	close(ends[1].fd);
	return 0;
}

static void
begin_writes_a_marker_naming_what_was_consumed_and_sent(void **state)
{
	struct end *ends = *state;
	struct wire_marker m;

	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	assert_int_equal(path(&ends[0]), CONN_MOVING);
	assert_true(ends[0].t.frozen);
	assert_int_equal(published, SHARE_MOVING);
	m = read_marker(ends[1].fd);
	assert_int_equal(m.resume, a_pos.consumed);
	assert_int_equal(m.sent, a_pos.staged);
	assert_int_equal(m.cause, ROCESHIM_DOWNGRADE_FORK);
}

static void second_begin_writes_no_second_marker(void **state)
{
	struct end *ends = *state;

	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	begin(&ends[0], ROCESHIM_DOWNGRADE_EXEC);
	read_marker(ends[1].fd);
	expect_nothing(ends[1].fd);
	assert_int_equal(ends[0].c.cause, ROCESHIM_DOWNGRADE_FORK);
}

static void peer_joins_when_the_marker_arrives(void **state)
{
	struct end *ends = *state;

	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[1]);
	assert_int_equal(path(&ends[1]), CONN_TCP);
	assert_int_equal(ends[1].c.cause, ROCESHIM_DOWNGRADE_PEER);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	assert_int_equal(published, SHARE_TCP);
}

static void each_end_resends_from_where_the_other_consumed(void **state)
{
	struct end *ends = *state;

	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[1]);
	kernel_event(&ends[0]);
	assert_int_equal(ends[0].c.backlog_from, ends[0].c.backlog_to);
	assert_int_equal(ends[1].c.backlog_from, ends[1].c.backlog_to);
	/* Past the marker that b read: a's stream from b's consumed on. */
	expect_stream(ends[1].fd, 1, b_pos.consumed,
		      a_pos.staged - b_pos.consumed);
	expect_nothing(ends[1].fd);
	expect_stream(ends[0].fd, 2, a_pos.consumed,
		      b_pos.staged - a_pos.consumed);
	expect_nothing(ends[0].fd);
}

static void nothing_is_resent_when_the_peer_consumed_it_all(void **state)
{
	struct end *ends = *state;

	ends[1].t.pos.consumed = a_pos.staged;
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[1]);
	kernel_event(&ends[0]);
	expect_nothing(ends[1].fd);
}

static void marker_resuming_past_what_was_sent_resets(void **state)
{
	struct end *ends = *state;

	ends[1].t.pos.consumed = a_pos.staged + 1;
	begin(&ends[1], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_FAILED);
	assert_int_equal(published, SHARE_FAILED);
	assert_int_equal(malformed, 1);
}

static void marker_resuming_before_what_was_acknowledged_resets(void **state)
{
	struct end *ends = *state;

	ends[1].t.pos.consumed = a_pos.released - 1;
	begin(&ends[1], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_FAILED);
	assert_int_equal(malformed, 1);
}

static void garbage_instead_of_a_marker_resets(void **state)
{
	struct end *ends = *state;
	uint8_t junk[WIRE_MARKER_LEN];

	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(send(ends[1].fd, junk, sizeof(junk), 0),
			 (ssize_t)sizeof(junk));
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_FAILED);
	assert_int_equal(malformed, 1);
}

static void marker_in_pieces_is_read_whole(void **state)
{
	struct end *ends = *state;
	struct wire_marker m = { .cause = ROCESHIM_DOWNGRADE_FORK,
				 .resume = b_pos.consumed,
				 .sent = b_pos.staged };
	uint8_t buf[WIRE_MARKER_LEN];

	wire_encode_marker(&m, buf);
	assert_int_equal(send(ends[1].fd, buf, 10, 0), 10);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_MOVING);
	assert_int_equal(send(ends[1].fd, buf + 10, sizeof(buf) - 10, 0),
			 (ssize_t)sizeof(buf) - 10);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_TCP);
}

static void peer_closing_before_its_marker_keeps_the_ring_readable(void **state)
{
	struct end *ends = *state;

	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	shutdown(ends[1].fd, SHUT_WR);
	read_marker(ends[1].fd);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_RDMA);
	assert_true(ends[0].t.unfrozen);
	assert_true(ends[0].t.peer_closed);
	assert_false(ends[0].t.peer_gone);
	assert_true(ends[0].c.peer_closed);
	assert_int_equal(published, SHARE_FAILED);
}

static void closed_peer_read_to_its_fin_moves_without_a_marker(void **state)
{
	struct end *ends = *state;
	char byte;

	shutdown(ends[1].fd, SHUT_WR);
	ends[0].c.peer_closed = true;
	ends[0].c.cause =
		ROCESHIM_DOWNGRADE_QP_ERROR; /* the peer's disconnect */
	ends[0].t.read_to_fin = true;
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	assert_int_equal(published, SHARE_TCP);
	assert_int_equal(ends[0].c.cause, ROCESHIM_DOWNGRADE_FORK);
	assert_int_equal(recv(ends[0].fd, &byte, 1, MSG_DONTWAIT), 0);
	expect_nothing(ends[1].fd);
}

static void close_not_yet_seen_is_found_before_a_marker_goes(void **state)
{
	struct end *ends = *state;
	struct pollfd pfd = { .fd = ends[0].fd, .events = POLLRDHUP };

	shutdown(ends[1].fd, SHUT_WR);
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	ends[0].t.read_to_fin = true;
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	assert_true(ends[0].c.peer_closed);
	assert_true(ends[0].t.peer_closed);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	expect_nothing(ends[1].fd);
}

static void closed_peer_with_bytes_unread_stays_on_rdma(void **state)
{
	struct end *ends = *state;

	shutdown(ends[1].fd, SHUT_WR);
	ends[0].c.peer_closed = true;
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	assert_int_equal(path(&ends[0]), CONN_RDMA);
	assert_false(ends[0].t.frozen);
	assert_int_equal(published, SHARE_RDMA);
	expect_nothing(ends[1].fd);
}

static void peer_reset_before_its_marker_is_left_for_the_program(void **state)
{
	struct end *ends = *state;
	char byte;

	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	reset_by(ends[1].fd);
	ends[1].fd = socket(AF_INET, SOCK_STREAM, 0);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_RDMA);
	assert_true(ends[0].c.peer_reset);
	assert_true(ends[0].t.peer_gone);
	assert_int_equal(recv(ends[0].fd, &byte, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, ECONNRESET);
}

static void no_move_starts_on_a_socket_holding_a_reset(void **state)
{
	struct end *ends = *state;
	struct pollfd pfd = { .fd = ends[0].fd };

	reset_by(ends[1].fd);
	ends[1].fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	assert_int_equal(path(&ends[0]), CONN_RDMA);
	assert_false(ends[0].t.frozen);
	assert_true(ends[0].c.peer_reset);
}

static void *read_whole_stream_of_a(void *arg)
{
	struct end *b = arg;

	read_marker(b->fd);
	expect_stream(b->fd, 1, 0, STREAM_MAX);
	return NULL;
}

/* a writes out its backlog as b's socket makes room: b reads it all. */
static void backlog_read_by_b(struct end *ends)
{
	struct pollfd pfd = { .fd = ends[0].fd, .events = POLLOUT };
	pthread_t reader;

	assert_int_equal(
		pthread_create(&reader, NULL, read_whole_stream_of_a, &ends[1]),
		0);
	while (!flush(&ends[0]))
		assert_int_equal(poll(&pfd, 1, 2000), 1);
	assert_int_equal(pthread_join(reader, NULL), 0);
}

static void backlog_waits_for_room_and_then_goes_out_whole(void **state)
{
	struct end *ends = *state;
	int small = 4096;

	ends[0].t.pos = (struct wire_positions){ .staged = STREAM_MAX };
	ends[1].t.pos = (struct wire_positions){ .staged = a_pos.consumed };
	setsockopt(ends[0].fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(ends[1].fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	begin(&ends[1], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	assert_true(ends[0].c.backlog_from < STREAM_MAX);
	assert_int_equal(ends[0].c.backlog_to, STREAM_MAX);
	backlog_read_by_b(ends);
	assert_int_equal(ends[0].c.backlog_from, STREAM_MAX);
	expect_nothing(ends[1].fd);
}

/* a moved with a backlog that b's socket cannot take all of at once. */
static void moved_with_a_large_backlog(struct end *ends)
{
	int small = 4096;

	ends[0].t.pos = (struct wire_positions){ .staged = STREAM_MAX };
	ends[1].t.pos = (struct wire_positions){ .staged = a_pos.consumed };
	setsockopt(ends[0].fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(ends[1].fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	begin(&ends[1], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	assert_true(ends[0].c.backlog_from < STREAM_MAX);
}

static bool shut_write(struct end *e)
{
	bool now;

	pthread_mutex_lock(&e->c.lock);
	now = conn_move_shut_write_locked(&e->c);
	pthread_mutex_unlock(&e->c.lock);
	return now;
}

/* b reads a's marker, then a's resend past what b consumed, then EOF. */
static void expect_resend_then_eof(struct end *ends)
{
	char byte;

	read_marker(ends[1].fd);
	expect_stream(ends[1].fd, 1, b_pos.consumed,
		      a_pos.staged - b_pos.consumed);
	assert_int_equal(recv(ends[1].fd, &byte, 1, 0), 0);
}

static void write_shut_on_rdma_sends_fin_after_the_move_s_resend(void **state)
{
	struct end *ends = *state;

	assert_false(shut_write(&ends[0]));
	begin(&ends[1], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	expect_resend_then_eof(ends);
}

/*
 * The program's shutdown() sent the RDMA FIN while the connection was on
 * RDMA, and the peer's move ended before it took the lock: its kernel FIN
 * goes now, not never.
 */
static void write_shut_after_a_move_ended_meanwhile_sends_fin(void **state)
{
	struct end *ends = *state;

	begin(&ends[1], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[0]);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	assert_true(shut_write(&ends[0]));
	assert_int_equal(shutdown(ends[0].fd, SHUT_WR), 0);
	expect_resend_then_eof(ends);
}

static void
write_shut_before_the_backlog_is_out_sends_fin_after_it(void **state)
{
	struct end *ends = *state;
	char byte;

	moved_with_a_large_backlog(ends);
	assert_false(shut_write(&ends[0]));
	backlog_read_by_b(ends);
	assert_int_equal(recv(ends[1].fd, &byte, 1, 0), 0);
}

static void write_shut_after_the_peer_closed_sends_fin_at_once(void **state)
{
	struct end *ends = *state;

	ends[0].c.peer_closed = true;
	assert_true(shut_write(&ends[0]));
}

static void
fork_children_are_told_tcp_only_once_the_backlog_is_out(void **state)
{
	struct end *ends = *state;

	moved_with_a_large_backlog(ends);
	assert_int_equal(published, SHARE_MOVING);
	backlog_read_by_b(ends);
	assert_int_equal(published, SHARE_TCP);
}

/* fd reads what had arrived, then a reset, never an EOF. */
static void expect_reset_after_what_arrived(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char buf[4096];
	ssize_t n;

	do {
		assert_int_equal(poll(&pfd, 1, 2000), 1);
		n = recv(fd, buf, sizeof(buf), 0);
	} while (n > 0);
	assert_int_equal(n, -1);
	assert_int_equal(errno, ECONNRESET);
}

static void backlog_that_cannot_go_resets_both_ends(void **state)
{
	struct end *ends = *state;
	char buf[1];

	moved_with_a_large_backlog(ends);
	pthread_mutex_lock(&ends[0].c.lock);
	conn_move_reset_locked(&ends[0].c, "a test");
	pthread_mutex_unlock(&ends[0].c.lock);
	assert_int_equal(ends[0].c.backlog_from, ends[0].c.backlog_to);
	assert_int_equal(published, SHARE_TCP);
	assert_int_equal(recv(ends[0].fd, buf, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, ECONNRESET);
	expect_reset_after_what_arrived(ends[1].fd);
}

static void backlog_the_staging_ring_lost_resets_rather_than_ends(void **state)
{
	struct end *ends = *state;

	moved_with_a_large_backlog(ends);
	/* The staging ring no longer holds the rest of the backlog. */
	ends[0].t.pos.released = STREAM_MAX;
	pthread_mutex_lock(&ends[0].c.lock);
	assert_true(conn_move_flush_locked(&ends[0].c));
	pthread_mutex_unlock(&ends[0].c.lock);
	assert_int_equal(ends[0].c.backlog_from, ends[0].c.backlog_to);
	expect_reset_after_what_arrived(ends[1].fd);
}

/* a moves on b's marker alone: b's resend is held back. */
static void moved_without_b_s_resend(struct end *ends)
{
	struct wire_marker m = { .cause = ROCESHIM_DOWNGRADE_FORK,
				 .resume = b_pos.consumed,
				 .sent = b_pos.staged };
	uint8_t buf[WIRE_MARKER_LEN];

	wire_encode_marker(&m, buf);
	assert_int_equal(send(ends[1].fd, buf, sizeof(buf), 0),
			 (ssize_t)sizeof(buf));
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	kernel_event(&ends[0]);
}

/* b's resend of what a had not consumed, which a's move waits for. */
static void resend_of_b(struct end *ends)
{
	size_t n = b_pos.staged - a_pos.consumed;

	assert_int_equal(
		send(ends[1].fd, ends[1].t.stream + a_pos.consumed, n, 0),
		(ssize_t)n);
}

static void catch_up_waits_for_the_first_bytes_the_peer_resends(void **state)
{
	struct end *ends = *state;
	struct pollfd pfd = { .fd = ends[0].fd, .events = POLLIN };

	moved_without_b_s_resend(ends);
	assert_int_equal(path(&ends[0]), CONN_TCP);
	assert_false(caught_up(&ends[0]));
	resend_of_b(ends);
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	assert_true(caught_up(&ends[0]));
}

static void catch_up_ends_with_the_peer_s_close(void **state)
{
	struct end *ends = *state;
	struct pollfd pfd = { .fd = ends[0].fd, .events = POLLRDHUP };

	moved_without_b_s_resend(ends);
	assert_false(caught_up(&ends[0]));
	shutdown(ends[1].fd, SHUT_WR);
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	assert_true(caught_up(&ends[0]));
}

/* b's resend, 100 ms from now. */
static void *resend_of_b_later(void *arg)
{
	struct timespec pause = { .tv_nsec = 100 * 1000000 };

	nanosleep(&pause, NULL);
	resend_of_b(arg);
	return NULL;
}

/*
 * poll() may have reported bytes in the ring that the move then took
 * back: over TCP they would be there to read, so the read waits for them.
 */
static void non_blocking_read_in_catch_up_waits_for_the_resend(void **state)
{
	struct end *ends = *state;
	uint8_t buf[64];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	pthread_t resender;
	bool kernel;
	ssize_t n;

	moved_without_b_s_resend(ends);
	assert_int_equal(
		pthread_create(&resender, NULL, resend_of_b_later, ends), 0);
	n = conn_recv(&ends[0].c, ends[0].fd, &iov, 1, MSG_DONTWAIT, &kernel);
	pthread_join(resender, NULL);
	assert_true(n > 0);
	assert_memory_equal(buf, ends[1].t.stream + a_pos.consumed, n);
	assert_true(caught_up(&ends[0]));
}

static void
non_blocking_read_in_catch_up_waits_no_longer_than_the_move(void **state)
{
	struct end *ends = *state;
	uint8_t buf[64];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	int64_t started;
	bool kernel;

	ends[0].c.timeout_ms = 50;
	moved_without_b_s_resend(ends);
	started = clock_ms();
	assert_int_equal(conn_recv(&ends[0].c, ends[0].fd, &iov, 1,
				   MSG_DONTWAIT, &kernel),
			 -EAGAIN);
	assert_true(clock_ms() - started >= 40);
	assert_true(clock_ms() - started < 2000);
	started = clock_ms();
	assert_int_equal(conn_recv(&ends[0].c, ends[0].fd, &iov, 1,
				   MSG_DONTWAIT, &kernel),
			 -EAGAIN);
	assert_true(clock_ms() - started < 40);
}

/* End a's move waits 30 ms for a marker b never writes. */
static void move_unanswered(struct end *ends)
{
	struct timespec pause = { .tv_nsec = 20 * 1000000 };
	int64_t until;

	ends[0].c.timeout_ms = 30;
	begin(&ends[0], ROCESHIM_DOWNGRADE_FORK);
	until = clock_ms() + 5000;
	while (path(&ends[0]) == CONN_MOVING && clock_ms() < until) {
		conn_move_tick();
		nanosleep(&pause, NULL);
	}
}

static void unanswered_marker_fails_the_move_after_its_timeout(void **state)
{
	struct end *ends = *state;

	move_unanswered(ends);
	assert_int_equal(path(&ends[0]), CONN_FAILED);
	assert_int_equal(published, SHARE_FAILED);
}

static void
failed_move_resets_the_peer_rather_than_ending_its_stream(void **state)
{
	struct end *ends = *state;
	uint8_t marker[WIRE_MARKER_LEN];
	char byte;

	move_unanswered(ends);
	assert_int_equal(path(&ends[0]), CONN_FAILED);
	read_all(ends[1].fd, marker, sizeof(marker));
	assert_int_equal(recv(ends[1].fd, &byte, 1, 0), -1);
	assert_int_equal(errno, ECONNRESET);
}

static void failed_move_reports_the_reset_once(void **state)
{
	struct end *ends = *state;

	move_unanswered(ends);
	assert_int_equal(path(&ends[0]), CONN_FAILED);
	assert_int_equal(conn_take_error(&ends[0].c), ECONNRESET);
	assert_int_equal(conn_take_error(&ends[0].c), 0);
}

static void peer_that_took_and_sent_nothing_gets_the_longest_wait(void **state)
{
	struct end *ends = *state;
	struct timespec pause = { .tv_nsec = 20 * 1000000 };
	int i;

	ends[0].t.pos = (struct wire_positions){ .staged = 1000 };
	ends[0].c.timeout_ms = 30;
	begin(&ends[0], ROCESHIM_DOWNGRADE_QP_ERROR);
	assert_int_equal(ends[0].c.wait.deadline_ms - ends[0].c.wait.started_ms,
			 MOVE_WAIT_MAX_MS);
	for (i = 0; i < 5; i++) {
		conn_move_tick();
		nanosleep(&pause, NULL);
	}
	assert_int_equal(path(&ends[0]), CONN_MOVING);
}

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(begin_writes_a_marker_naming_what_was_consumed_and_sent),
		CASE(second_begin_writes_no_second_marker),
		CASE(peer_joins_when_the_marker_arrives),
		CASE(each_end_resends_from_where_the_other_consumed),
		CASE(nothing_is_resent_when_the_peer_consumed_it_all),
		CASE(marker_resuming_past_what_was_sent_resets),
		CASE(marker_resuming_before_what_was_acknowledged_resets),
		CASE(garbage_instead_of_a_marker_resets),
		CASE(marker_in_pieces_is_read_whole),
		CASE(peer_closing_before_its_marker_keeps_the_ring_readable),
		CASE(closed_peer_read_to_its_fin_moves_without_a_marker),
		CASE(closed_peer_with_bytes_unread_stays_on_rdma),
		CASE(close_not_yet_seen_is_found_before_a_marker_goes),
		CASE(peer_reset_before_its_marker_is_left_for_the_program),
		CASE(no_move_starts_on_a_socket_holding_a_reset),
		CASE(backlog_waits_for_room_and_then_goes_out_whole),
		CASE(write_shut_on_rdma_sends_fin_after_the_move_s_resend),
		CASE(write_shut_after_a_move_ended_meanwhile_sends_fin),
		CASE(write_shut_before_the_backlog_is_out_sends_fin_after_it),
		CASE(write_shut_after_the_peer_closed_sends_fin_at_once),
		CASE(fork_children_are_told_tcp_only_once_the_backlog_is_out),
		CASE(backlog_that_cannot_go_resets_both_ends),
		CASE(backlog_the_staging_ring_lost_resets_rather_than_ends),
		CASE(catch_up_waits_for_the_first_bytes_the_peer_resends),
		CASE(catch_up_ends_with_the_peer_s_close),
		CASE(non_blocking_read_in_catch_up_waits_for_the_resend),
		CASE(non_blocking_read_in_catch_up_waits_no_longer_than_the_move),
		CASE(unanswered_marker_fails_the_move_after_its_timeout),
		CASE(failed_move_resets_the_peer_rather_than_ending_its_stream),
		CASE(failed_move_reports_the_reset_once),
		CASE(peer_that_took_and_sent_nothing_gets_the_longest_wait),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
