// SPDX-License-Identifier: MIT
/*
 * Specification of the registry of epoll registrations
 * (src/epoll_registry.c): found by set, fd and owner, by set and data, and by
 * owner, through additions, changes and removals, at any size.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "epoll_registry.h"

/* Owners are only compared: any distinct addresses do. */
static char owners[8];
#define OWNER(i)   ((struct readiness *)&owners[i])
#define PENDING(i) ((struct sock *)&owners[i])

static struct epoll_reg *add(struct epoll_registry *g, int epfd, int fd,
			     struct readiness *r, uint64_t data)
{
	const struct epoll_reg val = {
		.epfd = epfd, .fd = fd, .r = r, .data = data, .events = 1
	};

	return epoll_registry_add(g, &val);
}

static unsigned int count_with(struct epoll_registry *g, int epfd,
			       uint64_t data)
{
	struct epoll_reg *o = NULL;
	unsigned int n = 0;

	while ((o = epoll_registry_next_with(g, epfd, data, o))) {
		assert_int_equal(o->epfd, epfd);
		assert_true(o->data == data);
		n++;
	}
	return n;
}

static unsigned int count_all(struct epoll_registry *g)
{
	struct epoll_reg *o = NULL;
	unsigned int n = 0;

	while ((o = epoll_registry_next(g, o)))
		n++;
	return n;
}

static void an_empty_registry_finds_nothing(void **state)
{
	struct epoll_registry g = { 0 };

	(void)state;
	assert_null(epoll_registry_find(&g, 3, 4, OWNER(0)));
	assert_null(epoll_registry_next_owned(&g, OWNER(0), NULL));
	assert_null(epoll_registry_next_with(&g, 3, 7, NULL));
	assert_null(epoll_registry_next(&g, NULL));
	epoll_registry_clear(&g);
}

static void an_added_registration_is_found_each_way(void **state)
{
	struct epoll_registry g = { 0 };
	struct epoll_reg *o;

	(void)state;
	o = add(&g, 3, 4, OWNER(0), 77);
	assert_non_null(o);
	assert_ptr_equal(epoll_registry_find(&g, 3, 4, OWNER(0)), o);
	assert_null(epoll_registry_find(&g, 4, 3, OWNER(0)));
	assert_null(epoll_registry_find(&g, 3, 5, OWNER(0)));
	assert_null(epoll_registry_find(&g, 3, 4, OWNER(1)));
	assert_ptr_equal(epoll_registry_next_owned(&g, OWNER(0), NULL), o);
	assert_null(epoll_registry_next_owned(&g, OWNER(1), NULL));
	assert_ptr_equal(epoll_registry_next_with(&g, 3, 77, NULL), o);
	assert_null(epoll_registry_next_with(&g, 4, 77, NULL));
	assert_int_equal(epoll_registry_count_owned(&g, OWNER(0)), 1);
	epoll_registry_clear(&g);
}

static void a_pending_registration_is_owned_by_its_sock(void **state)
{
	struct epoll_registry g = { 0 };
	const struct epoll_reg val = { .epfd = 3,
				       .fd = 4,
				       .pending = PENDING(2) };
	struct epoll_reg *o;

	(void)state;
	o = epoll_registry_add(&g, &val);
	assert_ptr_equal(epoll_registry_next_owned(&g, PENDING(2), NULL), o);
	assert_ptr_equal(epoll_registry_find(&g, 3, 4, PENDING(2)), o);
	epoll_registry_clear(&g);
}

/*
 * A registered fd closed while a dup keeps its socket open, its number
 * taken by another socket that is registered too: two registrations, as
 * the kernel keeps them, each its socket's.
 */
static void a_reused_number_keeps_each_sockets_registration(void **state)
{
	struct epoll_registry g = { 0 };
	struct epoll_reg *first, *second;

	(void)state;
	first = add(&g, 3, 4, OWNER(0), 4);
	second = add(&g, 3, 4, OWNER(1), 4);
	assert_non_null(second);
	assert_ptr_not_equal(first, second);
	assert_ptr_equal(epoll_registry_find(&g, 3, 4, OWNER(0)), first);
	assert_ptr_equal(epoll_registry_find(&g, 3, 4, OWNER(1)), second);
	assert_int_equal(count_with(&g, 3, 4), 2);
	epoll_registry_remove(&g, second);
	assert_ptr_equal(epoll_registry_find(&g, 3, 4, OWNER(0)), first);
	assert_null(epoll_registry_find(&g, 3, 4, OWNER(1)));
	assert_int_equal(count_with(&g, 3, 4), 1);
	epoll_registry_clear(&g);
}

static void a_change_moves_it_to_its_new_data_and_owner(void **state)
{
	struct epoll_registry g = { 0 };
	const struct epoll_reg val = {
		.epfd = 99, .fd = 99, .r = OWNER(1), .data = 8, .events = 5
	};
	struct epoll_reg *o;

	(void)state;
	o = add(&g, 3, 4, OWNER(0), 7);
	o->disarmed = true;
	epoll_registry_update(&g, o, &val);
	/* Its set and fd stay: they are its key. */
	assert_ptr_equal(epoll_registry_find(&g, 3, 4, OWNER(1)), o);
	assert_int_equal(o->events, 5);
	assert_false(o->disarmed);
	assert_int_equal(count_with(&g, 3, 7), 0);
	assert_ptr_equal(epoll_registry_next_with(&g, 3, 8, NULL), o);
	assert_null(epoll_registry_next_owned(&g, OWNER(0), NULL));
	assert_ptr_equal(epoll_registry_next_owned(&g, OWNER(1), NULL), o);
	epoll_registry_clear(&g);
}

static void a_removed_registration_is_gone_every_way(void **state)
{
	struct epoll_registry g = { 0 };
	struct epoll_reg *o;

	(void)state;
	add(&g, 3, 5, OWNER(0), 7);
	o = add(&g, 3, 4, OWNER(0), 7);
	epoll_registry_remove(&g, o);
	assert_null(epoll_registry_find(&g, 3, 4, OWNER(0)));
	assert_non_null(epoll_registry_find(&g, 3, 5, OWNER(0)));
	assert_int_equal(count_with(&g, 3, 7), 1);
	assert_int_equal(epoll_registry_count_owned(&g, OWNER(0)), 1);
	assert_int_equal(count_all(&g), 1);
	assert_int_equal(g.live, 1);
	epoll_registry_clear(&g);
}

static void registrations_sharing_data_are_all_found(void **state)
{
	struct epoll_registry g = { 0 };

	(void)state;
	add(&g, 3, 4, OWNER(0), 7);
	add(&g, 3, 5, OWNER(1), 7);
	add(&g, 6, 4, OWNER(0), 7);
	assert_int_equal(count_with(&g, 3, 7), 2);
	assert_int_equal(count_with(&g, 6, 7), 1);
	assert_int_equal(epoll_registry_count_owned(&g, OWNER(0)), 2);
	epoll_registry_clear(&g);
}

static void an_iteration_may_remove_where_it_stands(void **state)
{
	struct epoll_registry g = { 0 };
	struct epoll_reg *o, *next;
	int fd;

	(void)state;
	for (fd = 0; fd < 40; fd++)
		add(&g, 3, fd, OWNER(fd % 2), (uint64_t)fd);
	for (o = epoll_registry_next_owned(&g, OWNER(0), NULL); o; o = next) {
		next = epoll_registry_next_owned(&g, OWNER(0), o);
		epoll_registry_remove(&g, o);
	}
	assert_int_equal(epoll_registry_count_owned(&g, OWNER(0)), 0);
	assert_int_equal(epoll_registry_count_owned(&g, OWNER(1)), 20);
	for (o = epoll_registry_next(&g, NULL); o; o = next) {
		next = epoll_registry_next(&g, o);
		epoll_registry_remove(&g, o);
	}
	assert_int_equal(g.live, 0);
	assert_null(epoll_registry_next(&g, NULL));
	epoll_registry_clear(&g);
}

/* Thousands of registrations, removed and added back in another order. */
static void thousands_stay_findable_through_churn(void **state)
{
	enum {
		N = 5000
	};
	struct epoll_registry g = { 0 };
	struct epoll_reg *o;
	int fd;

	(void)state;
	for (fd = 0; fd < N; fd++)
		assert_non_null(add(&g, fd % 3, fd, OWNER(fd % 8),
				    (uint64_t)fd * 1000));
	for (fd = 0; fd < N; fd += 2)
		epoll_registry_remove(
			&g, epoll_registry_find(&g, fd % 3, fd, OWNER(fd % 8)));
	for (fd = N - 2; fd >= 0; fd -= 2)
		assert_non_null(add(&g, fd % 3, fd, OWNER(fd % 8),
				    (uint64_t)fd * 1000));
	assert_int_equal(g.live, N);
	assert_int_equal(count_all(&g), N);
	for (fd = 0; fd < N; fd++) {
		o = epoll_registry_find(&g, fd % 3, fd, OWNER(fd % 8));
		assert_non_null(o);
		assert_int_equal(o->fd, fd);
		assert_ptr_equal(o->r, OWNER(fd % 8));
		assert_int_equal(count_with(&g, fd % 3, (uint64_t)fd * 1000),
				 1);
	}
	assert_int_equal(epoll_registry_count_owned(&g, OWNER(5)), N / 8);
	epoll_registry_clear(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(an_empty_registry_finds_nothing),
		cmocka_unit_test(an_added_registration_is_found_each_way),
		cmocka_unit_test(a_pending_registration_is_owned_by_its_sock),
		cmocka_unit_test(
			a_reused_number_keeps_each_sockets_registration),
		cmocka_unit_test(a_change_moves_it_to_its_new_data_and_owner),
		cmocka_unit_test(a_removed_registration_is_gone_every_way),
		cmocka_unit_test(registrations_sharing_data_are_all_found),
		cmocka_unit_test(an_iteration_may_remove_where_it_stands),
		cmocka_unit_test(thousands_stay_findable_through_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
