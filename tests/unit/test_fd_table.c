// SPDX-License-Identifier: MIT
/* Specification of the fd table: references, dup sharing, ranges, and
 * lookups racing installs and removals from other threads. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "fd_table.h"

static int refs(const struct sock *sock)
{
	return __atomic_load_n(&sock->refs, __ATOMIC_RELAXED);
}

static void put_sock(int fd, struct sock *sock)
{
	(void)fd;
	sock_put(sock);
}

static void untracked_fd_is_not_found(void **state)
{
	assert_null(fd_table_get(3));
	assert_null(fd_table_get(FD_TABLE_MAX - 1));
}

static void installed_fd_is_found_with_a_reference(void **state)
{
	struct sock *sock = sock_new(2);
	struct sock *found;

	assert_int_equal(fd_table_install(10, sock), 0);
	assert_int_equal(refs(sock), 2);
	found = fd_table_get(10);
	assert_ptr_equal(found, sock);
	assert_int_equal(refs(sock), 3);
	sock_put(found);
	sock_put(fd_table_remove(10));
	sock_put(sock);
}

static void removed_fd_is_forgotten(void **state)
{
	struct sock *sock = sock_new(2);

	fd_table_install(11, sock);
	assert_ptr_equal(fd_table_remove(11), sock);
	assert_null(fd_table_get(11));
	assert_null(fd_table_remove(11));
	sock_put(sock);
	sock_put(sock);
}

static void install_over_a_tracked_fd_releases_the_old_sock(void **state)
{
	struct sock *old = sock_new(2);
	struct sock *new = sock_new(10);

	fd_table_install(12, old);
	assert_int_equal(refs(old), 2);
	fd_table_install(12, new);
	assert_int_equal(refs(old), 1);
	assert_ptr_equal(fd_table_get(12), new);
	sock_put(new);
	sock_put(fd_table_remove(12));
	sock_put(old);
	sock_put(new);
}

static void fds_out_of_range_are_refused(void **state)
{
	struct sock *sock = sock_new(2);

	assert_int_equal(fd_table_install(-1, sock), -EBADF);
	assert_int_equal(fd_table_install(FD_TABLE_MAX, sock), -EBADF);
	assert_null(fd_table_get(-5));
	assert_null(fd_table_get(FD_TABLE_MAX + 7));
	assert_null(fd_table_remove(-1));
	assert_int_equal(refs(sock), 1);
	sock_put(sock);
}

static void duplicates_share_one_sock_until_the_last_goes(void **state)
{
	struct sock *sock = sock_new(2);

	fd_table_install(20, sock);
	fd_table_install(21, sock);
	sock_put(sock);
	assert_int_equal(refs(sock), 2);
	sock_put(fd_table_remove(20));
	assert_ptr_equal(fd_table_get(21), sock);
	assert_int_equal(refs(sock), 2);
	sock_put(sock);
	sock_put(fd_table_remove(21));
}

static void range_removal_forgets_every_fd_in_it(void **state)
{
	struct sock *sock = sock_new(2);
	int fd;

	for (fd = 100; fd < 110; fd++)
		fd_table_install(fd, sock);
	fd_table_install(5000, sock);
	fd_table_remove_range(102, 4999, put_sock);
	assert_int_equal(refs(sock), 4); /* 100, 101, 5000 and ours */
	assert_non_null(fd_table_get(101));
	sock_put(sock);
	assert_null(fd_table_get(102));
	assert_null(fd_table_get(109));
	fd_table_remove_range(0, ~0u, put_sock);
	assert_int_equal(refs(sock), 1);
	sock_put(sock);
}

#define RACE_FDS     8
#define RACE_SECONDS 1

static volatile int race_stop;
static long race_mismatches;

/* A sock's domain field carries the fd it was installed for. */
static void *race_writer(void *arg)
{
	int fd = (int)(intptr_t)arg;

	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED)) {
		struct sock *sock = sock_new(1000 + fd);
		struct sock *old;

		fd_table_install(fd, sock);
		sock_put(sock);
		old = fd_table_remove(fd);
		if (old)
			sock_put(old);
	}
	return NULL;
}

static void *race_reader(void *arg)
{
	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED)) {
		int fd;

		for (fd = 300; fd < 300 + RACE_FDS; fd++) {
			struct sock *sock = fd_table_get(fd);

			if (!sock)
				continue;
			if (sock->domain != 1000 + fd)
				__atomic_fetch_add(&race_mismatches, 1,
						   __ATOMIC_RELAXED);
			sock_put(sock);
		}
	}
	return NULL;
}

static void concurrent_lookups_never_see_another_fds_sock(void **state)
{
	pthread_t writers[RACE_FDS], readers[2];
	struct timespec ts = { .tv_sec = RACE_SECONDS };
	int i;

	for (i = 0; i < RACE_FDS; i++)
		pthread_create(&writers[i], NULL, race_writer,
			       (void *)(intptr_t)(300 + i));
	for (i = 0; i < 2; i++)
		pthread_create(&readers[i], NULL, race_reader, NULL);
	nanosleep(&ts, NULL);
	__atomic_store_n(&race_stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < RACE_FDS; i++)
		pthread_join(writers[i], NULL);
	for (i = 0; i < 2; i++)
		pthread_join(readers[i], NULL);
	assert_int_equal(race_mismatches, 0);
	for (i = 0; i < RACE_FDS; i++)
		assert_null(fd_table_get(300 + i));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(untracked_fd_is_not_found),
		cmocka_unit_test(installed_fd_is_found_with_a_reference),
		cmocka_unit_test(removed_fd_is_forgotten),
		cmocka_unit_test(
			install_over_a_tracked_fd_releases_the_old_sock),
		cmocka_unit_test(fds_out_of_range_are_refused),
		cmocka_unit_test(duplicates_share_one_sock_until_the_last_goes),
		cmocka_unit_test(range_removal_forgets_every_fd_in_it),
		cmocka_unit_test(concurrent_lookups_never_see_another_fds_sock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
