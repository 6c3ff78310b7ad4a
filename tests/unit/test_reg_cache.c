// SPDX-License-Identifier: MIT
/* Specification of the registration cache (src/reg_cache.c): hits, stale
 * entries, references, eviction and the process's budget. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "reg_cache.h"

/* Addresses only: the cache never touches the memory. */
#define BASE ((uintptr_t)0x7f0000000000)
#define ID   1000

/* What the fake registration callbacks were asked. */
struct fake_mr {
	uintptr_t addr;
	size_t len;
	bool live;
};

static struct fake_mr mrs[256];
static unsigned int regs, deregs;
static int reg_errno;
static size_t page;

static void *fake_reg(void *ctx, void *addr, size_t len)
{
	struct fake_mr *mr;

	if (reg_errno) {
		errno = reg_errno;
		return NULL;
	}
	assert_true(regs < sizeof(mrs) / sizeof(mrs[0]));
	mr = &mrs[regs++];
	*mr = (struct fake_mr){ (uintptr_t)addr, len, true };
	return mr;
}

static void fake_dereg(void *mr)
{
	struct fake_mr *m = mr;

	assert_true(m->live);
	m->live = false;
	deregs++;
}

static const struct reg_cache_ops fake_ops = {
	.reg = fake_reg,
	.dereg = fake_dereg,
};

static int setup(void **state)
{
	memset(mrs, 0, sizeof(mrs));
	regs = deregs = 0;
	reg_errno = 0;
	page = (size_t)sysconf(_SC_PAGESIZE);
	/* Room for all a test registers, unless it tests the budget. */
	reg_cache_set_budget(4 * (REG_CACHE_ENTRIES + 1) * page);
	return 0;
}

/* Every test gives back all it registered. */
static int teardown(void **state)
{
	return reg_cache_registered_bytes() == 0 ? 0 : -1;
}

static struct reg_cache *fresh(void)
{
	struct reg_cache *rc = reg_cache_create(&fake_ops, NULL);

	assert_non_null(rc);
	return rc;
}

/* Four one-page allocations fill it; one page is a quarter of it. */
static void small_budget(void)
{
	reg_cache_set_budget(4 * page);
}

/* The one-page allocation number n, id ID + n: a buffer of 64 bytes. */
static struct fake_mr *get_page(struct reg_cache *rc, unsigned int n)
{
	uintptr_t start = BASE + n * page;
	int err = 0;
	struct fake_mr *mr = reg_cache_get(rc, start, page, ID + n,
					   (void *)(start + 16), 64, &err);

	assert_non_null(mr);
	assert_int_equal(err, 0);
	return mr;
}

static void repeated_get_of_one_allocation_registers_once(void **state)
{
	struct reg_cache *rc = fresh();
	uintptr_t start = BASE;
	void *a, *b;
	int err;

	a = reg_cache_get(rc, start, 2 * page, ID, (void *)start, 100, &err);
	b = reg_cache_get(rc, start, 2 * page, ID, (void *)(start + page), 100,
			  &err);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_int_equal(regs, 1);
	reg_cache_put(rc, a);
	reg_cache_put(rc, b);
	reg_cache_destroy(rc);
}

static void get_within_allocation_covers_whole_pages(void **state)
{
	struct reg_cache *rc = fresh();
	uintptr_t start = BASE + 100;
	struct fake_mr *mr;
	int err;

	mr = reg_cache_get(rc, start, page, ID, (void *)(start + 10), 20, &err);
	assert_non_null(mr);
	assert_int_equal(mr->addr, BASE);
	assert_int_equal(mr->len, 2 * page);
	assert_int_equal(reg_cache_registered_bytes(), 2 * page);
	reg_cache_put(rc, mr);
	reg_cache_destroy(rc);
}

static void new_buffer_id_at_same_address_registers_again(void **state)
{
	struct reg_cache *rc = fresh();
	void *old, *new;
	int err;

	old = reg_cache_get(rc, BASE, page, ID, (void *)BASE, 64, &err);
	reg_cache_put(rc, old);
	new = reg_cache_get(rc, BASE, page, ID + 1, (void *)BASE, 64, &err);
	assert_non_null(new);
	assert_ptr_not_equal(new, old);
	assert_int_equal(regs, 2);
	reg_cache_put(rc, new);
	reg_cache_destroy(rc);
}

static void stale_entry_is_deregistered_once_put(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *old, *new;
	int err;

	old = reg_cache_get(rc, BASE, page, ID, (void *)BASE, 64, &err);
	new = reg_cache_get(rc, BASE, page, ID + 1, (void *)BASE, 64, &err);
	assert_true(old->live);
	reg_cache_put(rc, old);
	assert_false(old->live);
	assert_int_equal(reg_cache_registered_bytes(), page);
	reg_cache_put(rc, new);
	reg_cache_destroy(rc);
}

static void stale_entry_is_never_found_again(void **state)
{
	struct reg_cache *rc = fresh();
	void *old, *new, *again;
	int err;

	old = reg_cache_get(rc, BASE, page, ID, (void *)BASE, 64, &err);
	new = reg_cache_get(rc, BASE + 64, 64, ID + 1, (void *)(BASE + 64), 64,
			    &err);
	again = reg_cache_get(rc, BASE, page, ID, (void *)BASE, 64, &err);
	assert_ptr_not_equal(again, old);
	assert_int_equal(regs, 3);
	reg_cache_put(rc, old);
	reg_cache_put(rc, new);
	reg_cache_put(rc, again);
	reg_cache_destroy(rc);
}

static void allocations_sharing_a_page_are_both_kept(void **state)
{
	struct reg_cache *rc = fresh();
	uintptr_t second = BASE + page / 2;
	void *a, *b;
	int err;

	a = reg_cache_get(rc, BASE, page / 2, ID, (void *)BASE, 64, &err);
	b = reg_cache_get(rc, second, page / 2, ID + 1, (void *)second, 64,
			  &err);
	reg_cache_put(rc, a);
	reg_cache_put(rc, b);
	assert_ptr_equal(
		reg_cache_get(rc, BASE, page / 2, ID, (void *)BASE, 64, &err),
		a);
	assert_int_equal(regs, 2);
	assert_int_equal(deregs, 0);
	reg_cache_put(rc, a);
	reg_cache_destroy(rc);
}

static void referenced_entry_is_never_evicted(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *held, *mr[4];
	unsigned int i;
	small_budget();

	held = get_page(rc, 0);
	for (i = 1; i < 4; i++)
		mr[i] = get_page(rc, i);
	for (i = 1; i < 4; i++)
		reg_cache_put(rc, mr[i]);
	mr[0] = get_page(rc, 4);
	assert_true(held->live);
	assert_false(mr[1]->live);
	reg_cache_put(rc, held);
	reg_cache_put(rc, mr[0]);
	reg_cache_destroy(rc);
}

static void least_recently_used_is_evicted_over_budget(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *mr[5];
	unsigned int i;
	small_budget();

	for (i = 0; i < 4; i++) {
		mr[i] = get_page(rc, i);
		reg_cache_put(rc, mr[i]);
	}
	reg_cache_put(rc, get_page(rc, 0));
	mr[4] = get_page(rc, 4);
	assert_false(mr[1]->live);
	assert_true(mr[0]->live && mr[2]->live && mr[3]->live);
	assert_int_equal(reg_cache_registered_bytes(), 4 * page);
	reg_cache_put(rc, mr[4]);
	reg_cache_destroy(rc);
}

static void over_budget_with_all_referenced_fails_enomem(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *mr[4];
	unsigned int i;
	int err = 0;
	small_budget();

	for (i = 0; i < 4; i++)
		mr[i] = get_page(rc, i);
	assert_null(reg_cache_get(rc, BASE + 4 * page, page, ID + 4,
				  (void *)(BASE + 4 * page), 64, &err));
	assert_int_equal(err, -ENOMEM);
	assert_int_equal(regs, 4);
	for (i = 0; i < 4; i++)
		reg_cache_put(rc, mr[i]);
	reg_cache_destroy(rc);
}

static void zero_budget_registers_nothing(void **state)
{
	struct reg_cache *rc = fresh();
	int err = 0;

	reg_cache_set_budget(0);
	assert_null(reg_cache_get(rc, BASE, page, ID, (void *)BASE, 64, &err));
	assert_int_equal(err, -ENOMEM);
	assert_int_equal(regs, 0);
	reg_cache_destroy(rc);
}

static void registration_error_is_returned(void **state)
{
	struct reg_cache *rc = fresh();
	int err = 0;

	reg_errno = EFAULT;
	assert_null(reg_cache_get(rc, BASE, page, ID, (void *)BASE, 64, &err));
	assert_int_equal(err, -EFAULT);
	reg_cache_destroy(rc);
}

static void failed_registration_holds_no_bytes(void **state)
{
	struct reg_cache *rc = fresh();
	int err;

	reg_errno = EFAULT;
	reg_cache_get(rc, BASE, page, ID, (void *)BASE, 64, &err);
	assert_int_equal(reg_cache_registered_bytes(), 0);
	reg_cache_destroy(rc);
}

static void allocation_larger_than_quarter_budget_registers_only_the_pages_used(
	void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *mr;
	int err;
	small_budget();

	mr = reg_cache_get(rc, BASE, 3 * page, ID, (void *)(BASE + page + 8),
			   page, &err);
	assert_non_null(mr);
	assert_int_equal(mr->addr, BASE + page);
	assert_int_equal(mr->len, 2 * page);
	reg_cache_put(rc, mr);
	reg_cache_destroy(rc);
}

static void entry_not_covering_the_buffer_is_a_miss(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *a, *b;
	int err;
	small_budget();

	a = reg_cache_get(rc, BASE, 3 * page, ID, (void *)BASE, 64, &err);
	b = reg_cache_get(rc, BASE, 3 * page, ID, (void *)(BASE + 2 * page), 64,
			  &err);
	assert_ptr_not_equal(a, b);
	assert_int_equal(b->addr, BASE + 2 * page);
	assert_true(a->live);
	reg_cache_put(rc, a);
	reg_cache_put(rc, b);
	reg_cache_destroy(rc);
}

static void buffer_outside_the_allocation_registers_its_pages(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *mr;
	int err;

	mr = reg_cache_get(rc, BASE, page, ID, (void *)(BASE + page - 8), 64,
			   &err);
	assert_non_null(mr);
	assert_int_equal(mr->addr, BASE);
	assert_int_equal(mr->len, 2 * page);
	reg_cache_put(rc, mr);
	reg_cache_destroy(rc);
}

static void buffer_without_allocation_range_is_found_again(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *mr;
	int err;

	mr = reg_cache_get(rc, 0, 0, ID, (void *)(BASE + 8), 64, &err);
	reg_cache_put(rc, mr);
	assert_ptr_equal(
		reg_cache_get(rc, 0, 0, ID, (void *)(BASE + 8), 64, &err), mr);
	assert_int_equal(regs, 1);
	reg_cache_put(rc, mr);
	reg_cache_destroy(rc);
}

static void buffer_larger_than_budget_evicts_nothing(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *kept;
	int err = 0;

	kept = get_page(rc, 0);
	reg_cache_put(rc, kept);
	reg_cache_set_budget(4 * page);
	assert_null(reg_cache_get(rc, BASE, 8 * page, ID + 1,
				  (void *)(BASE + 16 * page), 8 * page, &err));
	assert_int_equal(err, -ENOMEM);
	assert_int_equal(deregs, 0);
	reg_cache_destroy(rc);
}

static void budget_is_shared_by_all_caches(void **state)
{
	struct reg_cache *a = fresh(), *b = fresh();
	struct fake_mr *mr[2];
	int err = 0;

	mr[0] = reg_cache_get(a, BASE, 2 * page, ID, (void *)BASE, 64, &err);
	mr[1] = reg_cache_get(b, BASE + 2 * page, 2 * page, ID + 1,
			      (void *)(BASE + 2 * page), 64, &err);
	assert_int_equal(reg_cache_registered_bytes(), 4 * page);
	small_budget();
	assert_null(reg_cache_get(b, BASE + 4 * page, page, ID + 2,
				  (void *)(BASE + 4 * page), 64, &err));
	assert_int_equal(err, -ENOMEM);
	reg_cache_put(a, mr[0]);
	reg_cache_put(b, mr[1]);
	reg_cache_destroy(a);
	reg_cache_destroy(b);
}

static void a_cache_evicts_only_its_own_entries(void **state)
{
	struct reg_cache *a = fresh(), *b = fresh();
	struct fake_mr *mr;
	unsigned int i;
	int err = 0;
	small_budget();

	for (i = 0; i < 4; i++)
		reg_cache_put(a, get_page(a, i));
	assert_null(reg_cache_get(b, BASE + 4 * page, page, ID + 4,
				  (void *)(BASE + 4 * page), 64, &err));
	assert_int_equal(err, -ENOMEM);
	assert_int_equal(deregs, 0);
	mr = get_page(a, 4);
	assert_int_equal(deregs, 1);
	reg_cache_put(a, mr);
	reg_cache_destroy(a);
	reg_cache_destroy(b);
}

static void entry_limit_evicts_least_recently_used(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *first;
	unsigned int i;

	for (i = 0; i < REG_CACHE_ENTRIES; i++)
		reg_cache_put(rc, get_page(rc, i));
	first = &mrs[0];
	reg_cache_put(rc, get_page(rc, REG_CACHE_ENTRIES));
	assert_false(first->live);
	assert_int_equal(deregs, 1);
	reg_cache_destroy(rc);
}

static void entry_limit_with_all_referenced_fails_enomem(void **state)
{
	struct reg_cache *rc = fresh();
	uintptr_t next = BASE + REG_CACHE_ENTRIES * page;
	unsigned int i;
	int err = 0;

	for (i = 0; i < REG_CACHE_ENTRIES; i++)
		get_page(rc, i);
	assert_null(reg_cache_get(rc, next, page, ID + REG_CACHE_ENTRIES,
				  (void *)next, 64, &err));
	assert_int_equal(err, -ENOMEM);
	for (i = 0; i < REG_CACHE_ENTRIES; i++)
		reg_cache_put(rc, &mrs[i]);
	reg_cache_destroy(rc);
}

static void trim_deregisters_only_entries_nobody_holds(void **state)
{
	struct reg_cache *rc = fresh();
	struct fake_mr *held;

	reg_cache_put(rc, get_page(rc, 0));
	held = get_page(rc, 1);
	reg_cache_trim(rc);
	assert_int_equal(deregs, 1);
	assert_true(held->live);
	assert_int_equal(reg_cache_registered_bytes(), page);
	reg_cache_put(rc, held);
	reg_cache_destroy(rc);
}

static void destroy_deregisters_everything(void **state)
{
	struct reg_cache *rc = fresh();
	unsigned int i;

	for (i = 0; i < 3; i++)
		reg_cache_put(rc, get_page(rc, i));
	reg_cache_destroy(rc);
	assert_int_equal(deregs, 3);
	assert_int_equal(reg_cache_registered_bytes(), 0);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(repeated_get_of_one_allocation_registers_once),
		TEST(get_within_allocation_covers_whole_pages),
		TEST(new_buffer_id_at_same_address_registers_again),
		TEST(stale_entry_is_deregistered_once_put),
		TEST(stale_entry_is_never_found_again),
		TEST(allocations_sharing_a_page_are_both_kept),
		TEST(referenced_entry_is_never_evicted),
		TEST(least_recently_used_is_evicted_over_budget),
		TEST(over_budget_with_all_referenced_fails_enomem),
		TEST(zero_budget_registers_nothing),
		TEST(registration_error_is_returned),
		TEST(failed_registration_holds_no_bytes),
		TEST(allocation_larger_than_quarter_budget_registers_only_the_pages_used),
		TEST(entry_not_covering_the_buffer_is_a_miss),
		TEST(buffer_outside_the_allocation_registers_its_pages),
		TEST(buffer_without_allocation_range_is_found_again),
		TEST(buffer_larger_than_budget_evicts_nothing),
		TEST(budget_is_shared_by_all_caches),
		TEST(a_cache_evicts_only_its_own_entries),
		TEST(entry_limit_evicts_least_recently_used),
		TEST(entry_limit_with_all_referenced_fails_enomem),
		TEST(trim_deregisters_only_entries_nobody_holds),
		TEST(destroy_deregisters_everything),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
