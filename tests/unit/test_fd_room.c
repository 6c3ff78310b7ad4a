// SPDX-License-Identifier: MIT
/* Specification of where roceshim keeps its own descriptors (src/fd_room.c):
 * out of the program's way, above its soft RLIMIT_NOFILE, and where that
 * cannot be, never within FD_ROOM_SPARE numbers of the limit.  Tests that
 * lower the hard limit, which cannot be raised again, run in a child. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd_room.h"
#include "real.h"

#define SOFT 64

static struct rlimit saved;

static int set_soft(void **state)
{
	struct rlimit lim;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	lim = saved;
	lim.rlim_cur = SOFT;
	return setrlimit(RLIMIT_NOFILE, &lim);
}

static int restore(void **state)
{
	(void)state;
	return setrlimit(RLIMIT_NOFILE, &saved);
}

static rlim_t soft_limit(void)
{
	struct rlimit lim;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
	return lim.rlim_cur;
}

/* Runs body in a child whose hard limit is its soft limit, SOFT. */
static void with_no_room_above(void (*body)(void))
{
	struct rlimit lim = { .rlim_cur = SOFT, .rlim_max = SOFT };
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (!pid) {
		if (setrlimit(RLIMIT_NOFILE, &lim))
			_exit(2);
		body();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* In a child, where cmocka's asserts cannot report. */
static void expect(int ok)
{
	if (!ok)
		_exit(1);
}

/* Takes every number below n; returns how many it took. */
static int fill_below(int n, int *fds, int max)
{
	int count = 0, fd;

	while (count < max) {
		fd = eventfd(0, EFD_CLOEXEC);
		if (fd < 0)
			break;
		if (fd >= n) {
			close(fd);
			break;
		}
		fds[count++] = fd;
	}
	return count;
}

static void own_calls_are_known_only_between_enter_and_leave(void **state)
{
	(void)state;
	assert_false(fd_room_inside());
	fd_room_enter();
	fd_room_enter();
	assert_true(fd_room_inside());
	fd_room_leave();
	assert_true(fd_room_inside());
	fd_room_leave();
	assert_false(fd_room_inside());
}

static void hidden_descriptor_lands_above_the_soft_limit(void **state)
{
	int fd = eventfd(0, EFD_CLOEXEC), hidden;

	(void)state;
	hidden = fd_room_hide(fd);
	assert_true(hidden >= SOFT);
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	close(hidden);
}

static void soft_limit_is_the_programs_again_after_a_move(void **state)
{
	(void)state;
	close(fd_room_hide(eventfd(0, EFD_CLOEXEC)));
	assert_int_equal(soft_limit(), SOFT);
}

static void programs_next_descriptor_gets_the_number_a_move_freed(void **state)
{
	int fd = eventfd(0, EFD_CLOEXEC), hidden, next;

	(void)state;
	hidden = fd_room_hide(fd);
	next = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(next, fd);
	close(next);
	close(hidden);
}

static void hidden_descriptor_stays_close_on_exec(void **state)
{
	int hidden = fd_room_hide(eventfd(0, EFD_CLOEXEC));

	(void)state;
	assert_int_equal(fcntl(hidden, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(hidden);
}

static void copy_of_a_socket_lands_above_the_soft_limit(void **state)
{
	int fd = eventfd(0, EFD_CLOEXEC), copy;

	(void)state;
	copy = fd_room_dup(fd);
	assert_true(copy >= SOFT);
	assert_int_equal(fcntl(fd, F_GETFD), FD_CLOEXEC);
	close(copy);
	close(fd);
}

static void program_at_its_limit_still_has_room_when_moves_work(void **state)
{
	int fds[SOFT], n;

	(void)state;
	n = fill_below(SOFT - 8, fds, SOFT);
	assert_true(fd_room());
	while (n)
		close(fds[--n]);
}

static void descriptor_is_made_when_the_program_holds_every_number(void **state)
{
	int fds[SOFT], n, fd;

	(void)state;
	n = fill_below(SOFT, fds, SOFT);
	assert_int_equal(eventfd(0, EFD_CLOEXEC), -1);
	fd = fd_room_eventfd();
	assert_true(fd >= SOFT);
	assert_int_equal(soft_limit(), SOFT);
	assert_int_equal(eventfd(0, EFD_CLOEXEC), -1);
	close(fd);
	while (n)
		close(fds[--n]);
}

/*
 * Without room above, hidden descriptors fill the highest free numbers
 * below the limit (FD_ROOM_SPARE short of it) from the top down, and the
 * program's next descriptor gets the number it would have got.
 */
static void goes_to_the_top_without_room_above(void)
{
	int fd = eventfd(0, EFD_CLOEXEC), hidden, second, next;

	expect(fd >= 0);
	hidden = fd_room_hide(fd);
	expect(hidden == SOFT - FD_ROOM_SPARE - 1);
	expect(fcntl(hidden, F_GETFD) == FD_CLOEXEC);
	second = fd_room_eventfd();
	expect(second > fd && second < hidden);
	next = eventfd(0, EFD_CLOEXEC);
	expect(next == fd);
}

static void descriptor_goes_to_the_top_without_room_above(void **state)
{
	(void)state;
	with_no_room_above(goes_to_the_top_without_room_above);
}

/* With the numbers near the top taken, it stays where it was made. */
static void stays_where_it_is_with_the_top_taken(void)
{
	int fds[SOFT], n = fill_below(SOFT - FD_ROOM_SPARE, fds, SOFT), fd;

	expect(n > 0);
	close(fds[0]);
	fd = eventfd(0, EFD_CLOEXEC);
	expect(fd_room_hide(fd) == fd);
}

static void descriptor_stays_where_it_is_with_the_top_taken(void **state)
{
	(void)state;
	with_no_room_above(stays_where_it_is_with_the_top_taken);
}

static void refuses_within_the_spare_without_room_above(void)
{
	int fds[SOFT], fd;

	fill_below(SOFT - FD_ROOM_SPARE + 1, fds, SOFT);
	fd = eventfd(0, EFD_CLOEXEC);
	expect(fd >= 0);
	expect(fd_room_hide(fd) == -EMFILE);
	expect(fcntl(fd, F_GETFD) == FD_CLOEXEC);
	expect(!fd_room());
}

static void
descriptor_within_the_spare_is_refused_without_room_above(void **state)
{
	(void)state;
	with_no_room_above(refuses_within_the_spare_without_room_above);
}

static void keeps_where_a_connection_would_be_refused(void)
{
	int fds[SOFT], fd;

	fill_below(SOFT - FD_ROOM_SPARE + 1, fds, SOFT);
	fd = eventfd(0, EFD_CLOEXEC);
	expect(fd_room_keep(fd) == fd);
}

static void
process_descriptor_is_kept_where_a_connection_is_refused(void **state)
{
	(void)state;
	with_no_room_above(keeps_where_a_connection_would_be_refused);
}

/* Admitted, a connection's descriptors must not be refused half-made. */
static void refuses_a_connection_that_would_be_refused_half_made(void)
{
	int fds[SOFT], made = 0, fd;

	fill_below(SOFT - FD_ROOM_SPARE - 1, fds, SOFT);
	if (fd_room()) {
		while (made < 8 && (fd = fd_room_eventfd()) >= 0)
			made++;
		expect(made == 8);
	}
	expect(!fd_room());
}

static void connection_is_admitted_only_with_room_for_all_it_makes(void **state)
{
	(void)state;
	with_no_room_above(
		refuses_a_connection_that_would_be_refused_half_made);
}

struct raiser {
	int entered;
};

static void *raise_for_a_while(void *arg)
{
	struct raiser *r = arg;

	fd_room_enter();
	__atomic_store_n(&r->entered, 1, __ATOMIC_SEQ_CST);
	usleep(100000);
	fd_room_leave();
	return NULL;
}

static void programs_limit_is_its_own_while_another_thread_raises(void **state)
{
	struct raiser r = { 0 };
	pthread_t th;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, raise_for_a_while, &r), 0);
	while (!__atomic_load_n(&r.entered, __ATOMIC_SEQ_CST))
		usleep(1000);
	assert_true(soft_limit() > SOFT);
	assert_int_equal(fd_room_program_limit(), SOFT);
	pthread_join(th, NULL);
}

static void copies_below_without_room_above(void)
{
	int fd = eventfd(0, EFD_CLOEXEC), copy = fd_room_dup(fd);

	expect(copy >= 0 && copy < SOFT);
}

static void copy_is_made_below_without_room_above(void **state)
{
	(void)state;
	with_no_room_above(copies_below_without_room_above);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			own_calls_are_known_only_between_enter_and_leave),
		cmocka_unit_test(hidden_descriptor_lands_above_the_soft_limit),
		cmocka_unit_test(soft_limit_is_the_programs_again_after_a_move),
		cmocka_unit_test(
			programs_next_descriptor_gets_the_number_a_move_freed),
		cmocka_unit_test(hidden_descriptor_stays_close_on_exec),
		cmocka_unit_test(copy_of_a_socket_lands_above_the_soft_limit),
		cmocka_unit_test(
			program_at_its_limit_still_has_room_when_moves_work),
		cmocka_unit_test(
			descriptor_is_made_when_the_program_holds_every_number),
		cmocka_unit_test(descriptor_goes_to_the_top_without_room_above),
		cmocka_unit_test(
			descriptor_stays_where_it_is_with_the_top_taken),
		cmocka_unit_test(
			descriptor_within_the_spare_is_refused_without_room_above),
		cmocka_unit_test(copy_is_made_below_without_room_above),
		cmocka_unit_test(
			process_descriptor_is_kept_where_a_connection_is_refused),
		cmocka_unit_test(
			connection_is_admitted_only_with_room_for_all_it_makes),
		cmocka_unit_test(
			programs_limit_is_its_own_while_another_thread_raises),
	};

	real_init();
	return cmocka_run_group_tests(tests, set_soft, restore);
}
