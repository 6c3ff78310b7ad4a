// SPDX-License-Identifier: MIT
/* Specification of the statistics segment: a stable layout, created on
 * first use, rows reused only once closed, counters in rows and totals.
 * The tests share one segment and run in order. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "real.h"
#include "stats.h"

#define ROWS 16

static struct roceshim_stats_endpoint local_ep = { .port = 1, .family = 2 };
static struct roceshim_stats_endpoint peer_ep = { .port = 2, .family = 2 };

static bool segment_name_exists(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/shm%s%d", ROCESHIM_STATS_SHM_PREFIX,
		 getpid());
	return access(path, F_OK) == 0;
}

static struct roceshim_stats_row *row(int index)
{
	return (struct roceshim_stats_row *)(stats_segment() + 1) + index;
}

static int open_conn(int fd)
{
	return stats_row_open(fd, ROCESHIM_ROLE_ACTIVE, ROCESHIM_ROW_OPEN,
			      ROCESHIM_REASON_NO_DEVICE, &local_ep, &peer_ep);
}

/* Readers of other builds depend on these: change them only together
 * with ROCESHIM_STATS_LAYOUT_VERSION. */
static void layout_is_pinned_for_version_5(void **state)
{
	assert_int_equal(ROCESHIM_STATS_LAYOUT_VERSION, 5);
	assert_int_equal(sizeof(struct roceshim_stats_memory), 128);
	assert_int_equal(sizeof(struct roceshim_stats_endpoint), 20);
	assert_int_equal(sizeof(struct roceshim_stats_counters), 64);
	assert_int_equal(sizeof(struct roceshim_stats_rings), 32);
	assert_int_equal(sizeof(struct roceshim_stats_row_rings), 64);
	assert_int_equal(sizeof(struct roceshim_stats_row), 192);
	assert_int_equal(offsetof(struct roceshim_stats_row, local), 24);
	assert_int_equal(offsetof(struct roceshim_stats_row, counters), 64);
	assert_int_equal(offsetof(struct roceshim_stats_row, rings), 128);
	assert_int_equal(offsetof(struct roceshim_stats_header, command), 40);
	assert_int_equal(offsetof(struct roceshim_stats_header, global), 104);
	assert_int_equal(sizeof(struct roceshim_stats_global), 656);
	assert_int_equal(sizeof(struct roceshim_stats_header), 768);
}

static const struct stats_ring_sizes grown = {
	.rx_bytes = 256u << 10,
	.tx_bytes = 16u << 10,
	.pinned_bytes = (256u + 16u) << 10,
};

static void ring_changes_are_refused_before_the_segment(void **state)
{
	assert_false(stats_rings(-1, STATS_RING_CHANGED, 4096, &grown));
}

static void ring_changes_show_in_the_row_and_the_process(void **state)
{
	struct roceshim_stats_rings *g = &stats_segment()->global.rings;
	struct roceshim_stats_rings before = *g;
	int r = open_conn(44);

	assert_true(stats_rings(r, STATS_RING_GREW, 240 << 10, &grown));
	assert_int_equal(row(r)->rings.rx_ring_bytes, 256u << 10);
	assert_int_equal(row(r)->rings.tx_ring_bytes, 16u << 10);
	assert_int_equal(row(r)->rings.pinned_bytes, (256u + 16u) << 10);
	assert_int_equal(row(r)->rings.grows, 1);
	assert_int_equal(g->pinned_bytes - before.pinned_bytes, 240 << 10);
	assert_int_equal(g->grows - before.grows, 1);
	assert_true(stats_rings(r, STATS_RING_SHRANK, -(240 << 10), &grown));
	assert_true(stats_rings(-1, STATS_RING_REFUSED, 0, &grown));
	assert_int_equal(row(r)->rings.shrinks, 1);
	assert_int_equal(g->pinned_bytes, before.pinned_bytes);
	assert_int_equal(g->shrinks - before.shrinks, 1);
	assert_int_equal(g->refused - before.refused, 1);
	stats_row_close(r);
}

static void a_reused_row_starts_without_rings(void **state)
{
	int r, i;

	for (i = 0; i < ROWS; i++) {
		r = open_conn(100 + i);
		stats_rings(r, STATS_RING_GREW, 0, &grown);
		stats_row_close(r);
	}
	r = open_conn(200);
	assert_int_equal(row(r)->rings.pinned_bytes, 0);
	assert_int_equal(row(r)->rings.rx_ring_bytes, 0);
	assert_int_equal(row(r)->rings.grows, 0);
	stats_row_close(r);
}

static void reason_names_are_stable(void **state)
{
	assert_string_equal(roceshim_reason_name(ROCESHIM_REASON_NO_DEVICE),
			    "no_device");
	assert_string_equal(roceshim_reason_name(ROCESHIM_REASON_EXCLUDED),
			    "excluded");
	assert_string_equal(roceshim_reason_name(ROCESHIM_REASON_IO_URING),
			    "io_uring");
	assert_string_equal(roceshim_reason_name(ROCESHIM_REASON_PREFORK),
			    "prefork");
	assert_string_equal(roceshim_reason_name(ROCESHIM_REASON_HANDOFF),
			    "handoff");
	assert_string_equal(roceshim_reason_name(ROCESHIM_REASON_REUSEPORT),
			    "reuseport");
	assert_string_equal(
		roceshim_downgrade_name(ROCESHIM_DOWNGRADE_REUSEPORT),
		"reuseport");
	assert_string_equal(
		roceshim_downgrade_name(ROCESHIM_DOWNGRADE_IO_URING),
		"io_uring");
	assert_string_equal(
		roceshim_downgrade_name(ROCESHIM_DOWNGRADE_EPOLL_DUP),
		"epoll_dup");
	assert_string_equal(
		roceshim_downgrade_name(ROCESHIM_DOWNGRADE_SEND_STALL),
		"send_stall");
	assert_string_equal(roceshim_reason_name(ROCESHIM_REASON_COUNT),
			    "unknown");
	assert_string_equal(roceshim_reason_name(200), "unknown");
	assert_string_equal(roceshim_state_name(99), "unknown");
}

static void segment_appears_on_first_row_only(void **state)
{
	stats_configure(true, ROWS);
	assert_null(stats_segment());
	assert_false(segment_name_exists());
	assert_int_equal(open_conn(3), 0);
	assert_non_null(stats_segment());
	assert_true(segment_name_exists());
	assert_int_equal(stats_segment()->magic, ROCESHIM_STATS_MAGIC);
	assert_int_equal(stats_segment()->layout_version,
			 ROCESHIM_STATS_LAYOUT_VERSION);
	assert_int_equal(stats_segment()->row_count, ROWS);
	assert_int_equal(stats_segment()->pid, getpid());
	assert_true(stats_segment()->start_ticks > 0);
	stats_row_close(0);
}

static void row_holds_identity_and_counters(void **state)
{
	struct roceshim_stats_header *seg = stats_segment();
	uint64_t tx_before = seg->global.totals.tcp_tx_bytes;
	int r = open_conn(42);

	assert_true(r >= 0);
	assert_int_equal(row(r)->fd, 42);
	assert_int_equal(row(r)->state, ROCESHIM_ROW_OPEN);
	assert_int_equal(row(r)->transport, ROCESHIM_TRANSPORT_TCP);
	assert_int_equal(row(r)->reason, ROCESHIM_REASON_NO_DEVICE);
	assert_int_equal(row(r)->seq % 2, 0);
	stats_tcp_tx(r, 100);
	stats_tcp_tx(r, 23);
	stats_tcp_rx(r, 7);
	stats_error(r);
	stats_credit_stall(r);
	stats_rdma_rx(r, 50);
	assert_int_equal(row(r)->counters.credit_stalls, 1);
	assert_int_equal(row(r)->counters.rdma_rx_bytes, 50);
	assert_int_equal(row(r)->counters.tcp_tx_bytes, 123);
	assert_int_equal(row(r)->counters.tx_msgs, 2);
	assert_int_equal(row(r)->counters.tcp_rx_bytes, 7);
	assert_int_equal(row(r)->counters.errors, 1);
	assert_int_equal(seg->global.totals.tcp_tx_bytes - tx_before, 123);
	stats_row_close(r);
	assert_int_equal(row(r)->state, ROCESHIM_ROW_CLOSED);
}

static void rowless_traffic_still_counts_in_totals(void **state)
{
	struct roceshim_stats_header *seg = stats_segment();
	uint64_t before = seg->global.totals.tcp_rx_bytes;

	stats_tcp_rx(-1, 1000);
	assert_int_equal(seg->global.totals.tcp_rx_bytes - before, 1000);
}

static void open_rows_are_never_reused(void **state)
{
	struct roceshim_stats_header *seg = stats_segment();
	uint64_t dropped = seg->global.rows_dropped;
	int rows[ROWS];
	int i, j;

	for (i = 0; i < ROWS; i++) {
		rows[i] = open_conn(100 + i);
		assert_true(rows[i] >= 0);
		for (j = 0; j < i; j++)
			assert_int_not_equal(rows[i], rows[j]);
	}
	assert_int_equal(open_conn(999), -1);
	assert_int_equal(seg->global.rows_dropped, dropped + 1);
	stats_row_close(rows[5]);
	assert_int_equal(open_conn(555), rows[5]);
	assert_int_equal(row(rows[5])->fd, 555);
	assert_int_equal(row(rows[5])->counters.tcp_tx_bytes, 0);
	for (i = 0; i < ROWS; i++)
		stats_row_close(rows[i]);
}

static void connections_are_counted_by_reason(void **state)
{
	struct roceshim_stats_global *g = &stats_segment()->global;
	uint64_t opened = g->connections_opened;
	uint64_t tcp = g->connections_tcp;
	uint64_t excluded = g->fallbacks[ROCESHIM_REASON_EXCLUDED];
	uint64_t listeners = g->listeners;
	int r;

	r = stats_row_open(7, ROCESHIM_ROLE_PASSIVE, ROCESHIM_ROW_OPEN,
			   ROCESHIM_REASON_EXCLUDED, &local_ep, &peer_ep);
	stats_row_close(r);
	r = stats_row_open(8, ROCESHIM_ROLE_LISTENER, ROCESHIM_ROW_LISTENING,
			   ROCESHIM_REASON_NO_DEVICE, &local_ep, &peer_ep);
	stats_row_close(r);
	assert_int_equal(g->connections_opened, opened + 1);
	assert_int_equal(g->connections_tcp, tcp + 1);
	assert_int_equal(g->fallbacks[ROCESHIM_REASON_EXCLUDED], excluded + 1);
	assert_int_equal(g->listeners, listeners + 1);
}

static void connecting_connection_counts_once_connected(void **state)
{
	struct roceshim_stats_global *g = &stats_segment()->global;
	uint64_t opened = g->connections_opened;
	uint64_t rdma = g->connections_rdma;
	int r;

	r = stats_row_open(9, ROCESHIM_ROLE_ACTIVE, ROCESHIM_ROW_CONNECTING,
			   ROCESHIM_REASON_NONE, &local_ep, &peer_ep);
	assert_int_equal(g->connections_opened, opened);
	stats_count_connected(ROCESHIM_REASON_NONE);
	stats_row_close(r);
	assert_int_equal(g->connections_opened, opened + 1);
	assert_int_equal(g->connections_rdma, rdma + 1);
}

static void failed_connect_counts_no_fallback(void **state)
{
	struct roceshim_stats_global *g = &stats_segment()->global;
	uint64_t opened = g->connections_opened;
	uint64_t no_device = g->fallbacks[ROCESHIM_REASON_NO_DEVICE];
	int r;

	r = stats_row_open(10, ROCESHIM_ROLE_ACTIVE, ROCESHIM_ROW_CONNECTING,
			   ROCESHIM_REASON_NO_DEVICE, &local_ep, &peer_ep);
	stats_row_set_state(r, ROCESHIM_ROW_FAILED);
	stats_row_close(r);
	assert_int_equal(g->connections_opened, opened);
	assert_int_equal(g->fallbacks[ROCESHIM_REASON_NO_DEVICE], no_device);
}

/*
 * Runs child() in a real fork child, the fork handlers called around it
 * as pthread_atfork would, after the parent has run parent() (may be
 * NULL); returns the child's exit status.
 */
static int in_fork_child(int (*child)(int row), void (*parent)(int row), int r)
{
	int status, go[2];
	char byte = 0;
	pid_t pid;

	assert_int_equal(pipe(go), 0);
	stats_fork_prepare();
	pid = fork();
	if (pid == 0) {
		stats_fork_child();
		int ret = read(go[0], &byte, 1) == 1 ? child(r) : 100;

		/* As roceshim's exit does: a child that published leaves
		 * none. */
		stats_shutdown(-1);
		_exit(ret);
	}
	stats_fork_parent();
	assert_true(pid > 0);
	if (parent)
		parent(r);
	assert_int_equal(write(go[1], &byte, 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(go[0]);
	close(go[1]);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static struct roceshim_stats_header *parent_segment;

static int count_in_child(int r)
{
	int own;

	stats_tcp_tx(r, 1000);
	if (!stats_segment() || stats_segment() == parent_segment)
		return 1; /* counted into the parent's mapping */
	if (row(r)->counters.tcp_tx_bytes != 1100)
		return 2; /* lost the parent's rows */
	/* Its first row publishes the copy, under its own pid. */
	own = open_conn(13);
	if (own < 0 || own == r || !segment_name_exists())
		return 3;
	return stats_segment()->pid == getpid() ? 0 : 4;
}

static void fork_child_counts_into_its_own_copy(void **state)
{
	int r = open_conn(11);

	stats_tcp_tx(r, 100);
	parent_segment = stats_segment();
	assert_int_equal(in_fork_child(count_in_child, NULL, r), 0);
	assert_int_equal(row(r)->counters.tcp_tx_bytes, 100);
	stats_row_close(r);
}

static int close_in_child(int r)
{
	stats_row_close(r);
	return row(r)->state == ROCESHIM_ROW_CLOSED ? 0 : 1;
}

static void fork_child_closing_a_row_leaves_the_parents_open(void **state)
{
	int r = open_conn(12);

	assert_int_equal(in_fork_child(close_in_child, NULL, r), 0);
	assert_int_equal(row(r)->state, ROCESHIM_ROW_OPEN);
	stats_row_close(r);
}

static int still_open(int r)
{
	stats_tcp_tx(r, 1);
	return row(r)->state == ROCESHIM_ROW_OPEN ? 0 : 1;
}

static void close_row(int r)
{
	stats_row_close(r);
}

static void fork_child_keeps_the_rows_as_they_were_at_the_fork(void **state)
{
	int r = open_conn(14);

	assert_int_equal(in_fork_child(still_open, close_row, r), 0);
	assert_int_equal(row(r)->state, ROCESHIM_ROW_CLOSED);
}

static int rows_opened_later_are_absent(int r)
{
	int i;

	for (i = 0; i < ROWS; i++) {
		if (row(i)->state != ROCESHIM_ROW_FREE && row(i)->fd == 15)
			return 1;
	}
	return 0;
}

static void open_row(int r)
{
	stats_row_close(open_conn(15));
}

static void fork_child_sees_no_row_its_parent_opened_later(void **state)
{
	assert_int_equal(
		in_fork_child(rows_opened_later_are_absent, open_row, -1), 0);
}

/* Whether this process maps the named segment of pid. */
static bool maps_segment_of(pid_t pid)
{
	char want[64], line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	snprintf(want, sizeof(want), "/dev/shm%s%d\n",
		 ROCESHIM_STATS_SHM_PREFIX, (int)pid);
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), w = strlen(want);
		if (n >= w && strcmp(line + n - w, want) == 0)
			found = true;
	}
	fclose(f);
	return found;
}

static int finds_a_row_with_fd_21(int r)
{
	int i;

	for (i = 0; i < ROWS; i++)
		if (row(i)->state != ROCESHIM_ROW_FREE && row(i)->fd == 21)
			return 1;
	return 0;
}

static int nothing(int r)
{
	return 0;
}

/*
 * A row in use at one fork and closed before the next: absent in the next
 * child's copy (the spare is rewritten, not made afresh).
 */
static void row_closed_between_forks_is_absent_in_next_child(void **state)
{
	int r = open_conn(21);

	assert_true(r >= 0);
	assert_int_equal(in_fork_child(nothing, NULL, r), 0);
	stats_row_close(r);
	assert_int_equal(in_fork_child(finds_a_row_with_fd_21, NULL, r), 0);
}

static pid_t parent_pid;

/* In a child: a fork of its own, handlers run; the grandchild's status. */
static int fork_again(int (*gchild)(int), int r)
{
	int status;
	pid_t pid;

	stats_fork_prepare();
	pid = fork();
	if (pid == 0) {
		stats_fork_child();
		_exit(gchild(r));
	}
	stats_fork_parent();
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 90;
	return WEXITSTATUS(status);
}

static int gchild_sees_row_open(int r)
{
	if (maps_segment_of(parent_pid))
		return 11; /* the grandparent's segment is still mapped */
	if (row(r)->state != ROCESHIM_ROW_OPEN)
		return 12; /* the inherited row is lost */
	if (row(r)->counters.tcp_tx_bytes != 5)
		return 13;
	return 0;
}

static int child_forks_unpublished(int r)
{
	if (!maps_segment_of(parent_pid))
		return 20; /* kept until it publishes */
	return fork_again(gchild_sees_row_open, r);
}

/*
 * A fork of a child that never published: the grandchild keeps the rows in
 * use, and drops the grandparent's segment.
 */
static void fork_of_unpublished_child_keeps_rows(void **state)
{
	int r = open_conn(22);

	stats_tcp_tx(r, 5);
	parent_pid = getpid();
	assert_int_equal(in_fork_child(child_forks_unpublished, NULL, r), 0);
	stats_row_close(r);
}

static int publish_unmaps_parent(int r)
{
	struct roceshim_stats_header *old;
	int own;

	if (!maps_segment_of(parent_pid))
		return 1;
	old = stats_segment();
	own = open_conn(23);
	if (own < 0 || stats_segment() == old)
		return 2;
	if (maps_segment_of(parent_pid))
		return 3; /* the parent's segment outlives the publish */
	stats_row_close(own);
	return 0;
}

static void publishing_child_unmaps_its_parents_segment(void **state)
{
	parent_pid = getpid();
	assert_int_equal(in_fork_child(publish_unmaps_parent, NULL, -1), 0);
}

static int claim_in_child(int r)
{
	stats_row_claimed(r, true);
	if (!segment_name_exists() || stats_segment()->pid != getpid())
		return 1; /* a claimed connection is the child's to show */
	if (row(r)->transport != ROCESHIM_TRANSPORT_TCP ||
	    row(r)->downgrade != ROCESHIM_DOWNGRADE_FORK)
		return 2;
	return 0;
}

static void fork_child_claiming_a_row_shows_it_moved(void **state)
{
	int r = open_conn(25);

	stats_row_set_reason(r, ROCESHIM_REASON_NONE);
	assert_int_equal(in_fork_child(claim_in_child, NULL, r), 0);
	assert_int_equal(row(r)->transport, ROCESHIM_TRANSPORT_RDMA);
	stats_row_close(r);
}

static int holds_no_rings(int r)
{
	if (row(r)->rings.pinned_bytes || row(r)->rings.rx_ring_bytes ||
	    row(r)->rings.tx_ring_bytes)
		return 1;
	return stats_segment()->global.rings.pinned_bytes ? 2 : 0;
}

/* Its parent's rings are not in a fork child's memory, nor in its count. */
static void fork_child_counts_no_rings_of_its_parent(void **state)
{
	uint64_t before = stats_segment()->global.rings.pinned_bytes;
	int r = open_conn(26);

	stats_row_set_reason(r, ROCESHIM_REASON_NONE);
	assert_true(stats_rings(r, STATS_RING_CHANGED, 272 << 10, &grown));
	assert_int_equal(in_fork_child(holds_no_rings, NULL, r), 0);
	assert_int_equal(row(r)->rings.pinned_bytes, (256u + 16u) << 10);
	assert_int_equal(stats_segment()->global.rings.pinned_bytes,
			 before + (272 << 10));
	assert_true(stats_rings(r, STATS_RING_CHANGED, -(272 << 10), &grown));
	stats_row_close(r);
}

static int counts_a_lot(int r)
{
	stats_tcp_tx(r, 1000000);
	return 0;
}

static int counts_are_parents(int r)
{
	return row(r)->counters.tcp_tx_bytes == 7 ? 0 : 1;
}

/* One child's counts, in its copy of the spare, do not reach the next. */
static void childs_counts_do_not_reach_a_later_child(void **state)
{
	int r = open_conn(24);

	stats_tcp_tx(r, 7);
	assert_int_equal(in_fork_child(counts_a_lot, NULL, r), 0);
	assert_int_equal(in_fork_child(counts_are_parents, NULL, r), 0);
	stats_row_close(r);
}

static void shutdown_removes_the_name(void **state)
{
	stats_shutdown(-1);
	assert_false(segment_name_exists());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layout_is_pinned_for_version_5),
		cmocka_unit_test(reason_names_are_stable),
		cmocka_unit_test(ring_changes_are_refused_before_the_segment),
		cmocka_unit_test(segment_appears_on_first_row_only),
		cmocka_unit_test(row_holds_identity_and_counters),
		cmocka_unit_test(ring_changes_show_in_the_row_and_the_process),
		cmocka_unit_test(a_reused_row_starts_without_rings),
		cmocka_unit_test(rowless_traffic_still_counts_in_totals),
		cmocka_unit_test(open_rows_are_never_reused),
		cmocka_unit_test(connections_are_counted_by_reason),
		cmocka_unit_test(connecting_connection_counts_once_connected),
		cmocka_unit_test(failed_connect_counts_no_fallback),
		cmocka_unit_test(fork_child_counts_into_its_own_copy),
		cmocka_unit_test(
			fork_child_closing_a_row_leaves_the_parents_open),
		cmocka_unit_test(
			fork_child_keeps_the_rows_as_they_were_at_the_fork),
		cmocka_unit_test(
			fork_child_sees_no_row_its_parent_opened_later),
		cmocka_unit_test(
			row_closed_between_forks_is_absent_in_next_child),
		cmocka_unit_test(publishing_child_unmaps_its_parents_segment),
		cmocka_unit_test(childs_counts_do_not_reach_a_later_child),
		cmocka_unit_test(fork_child_claiming_a_row_shows_it_moved),
		cmocka_unit_test(fork_child_counts_no_rings_of_its_parent),
		cmocka_unit_test(fork_of_unpublished_child_keeps_rows),
		cmocka_unit_test(shutdown_removes_the_name),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
