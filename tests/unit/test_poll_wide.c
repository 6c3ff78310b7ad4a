// SPDX-License-Identifier: MIT
/* Specification of poll() over more entries than RLIMIT_NOFILE allows
 * (src/poll_wide.c): the results are the kernel poll()'s, entry by
 * entry, however many entries there are. */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "poll_wide.h"
#include "real.h"

#define SOFT	 64
#define EVENTFDS 20
#define REPEATS	 5
#define ENTRIES	 (EVENTFDS * REPEATS)

static void ready_entry_is_reported(void **state)
{
	int fd = eventfd(1, EFD_CLOEXEC);
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
			       { .fd = -1, .events = POLLIN } };

	(void)state;
	assert_int_equal(poll_wide(p, 2, 0, NULL), 1);
	assert_int_equal(p[0].revents, POLLIN);
	assert_int_equal(p[1].revents, 0);
	close(fd);
}

static void nothing_ready_times_out_with_zero(void **state)
{
	int fd = eventfd(0, EFD_CLOEXEC);
	struct pollfd p = { .fd = fd, .events = POLLIN };

	(void)state;
	assert_int_equal(poll_wide(&p, 1, 10, NULL), 0);
	assert_int_equal(p.revents, 0);
	close(fd);
}

static void fd_listed_twice_gets_each_entrys_own_events(void **state)
{
	int fd = eventfd(0, EFD_CLOEXEC);
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
			       { .fd = fd, .events = POLLOUT } };

	(void)state;
	assert_int_equal(poll_wide(p, 2, 0, NULL), 1);
	assert_int_equal(p[0].revents, 0);
	assert_int_equal(p[1].revents, POLLOUT);
	close(fd);
}

static void closed_fd_is_invalid(void **state)
{
	int fd = eventfd(0, EFD_CLOEXEC);
	struct pollfd p = { .events = POLLIN };

	(void)state;
	p.fd = fd;
	close(fd);
	assert_int_equal(poll_wide(&p, 1, -1, NULL), 1);
	assert_int_equal(p.revents, POLLNVAL);
}

static void regular_file_is_ready_at_once(void **state)
{
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };

	(void)state;
	assert_int_equal(poll_wide(&p, 1, -1, NULL), 1);
	assert_int_equal(p.revents, POLLIN | POLLOUT);
	close(fd);
}

static void hangup_is_reported_unasked(void **state)
{
	int fds[2];
	struct pollfd p = { .events = 0 };

	(void)state;
	assert_int_equal(pipe(fds), 0);
	close(fds[1]);
	p.fd = fds[0];
	assert_int_equal(poll_wide(&p, 1, -1, NULL), 1);
	assert_int_equal(p.revents, POLLHUP);
	close(fds[0]);
}

static void more_entries_than_the_limit_are_waited_on(void **state)
{
	struct rlimit saved, lim;
	struct pollfd p[ENTRIES];
	int fds[EVENTFDS], i, ready = 0;

	(void)state;
	for (i = 0; i < EVENTFDS; i++)
		fds[i] = eventfd(i % 2, EFD_CLOEXEC);
	for (i = 0; i < ENTRIES; i++) {
		p[i].fd = fds[i % EVENTFDS];
		p[i].events = POLLIN;
	}
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	lim = saved;
	lim.rlim_cur = SOFT;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	assert_int_equal(poll(p, ENTRIES, 0), -1);
	assert_int_equal(poll_wide(p, ENTRIES, 0, NULL), ENTRIES / 2);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	for (i = 0; i < ENTRIES; i++) {
		assert_int_equal(p[i].revents, i % 2 ? POLLIN : 0);
		ready += p[i].revents != 0;
	}
	assert_int_equal(ready, ENTRIES / 2);
	for (i = 0; i < EVENTFDS; i++)
		close(fds[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ready_entry_is_reported),
		cmocka_unit_test(nothing_ready_times_out_with_zero),
		cmocka_unit_test(fd_listed_twice_gets_each_entrys_own_events),
		cmocka_unit_test(closed_fd_is_invalid),
		cmocka_unit_test(regular_file_is_ready_at_once),
		cmocka_unit_test(hangup_is_reported_unasked),
		cmocka_unit_test(more_entries_than_the_limit_are_waited_on),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
