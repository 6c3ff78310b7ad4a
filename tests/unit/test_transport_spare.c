// SPDX-License-Identifier: MIT
/* Specification of spares (src/transport_spare.c): a destroyed transport's
 * protection domain and first rings serve the next transport on the same
 * device with rings of the same size, for a second at most, within a
 * mebibyte of pinned memory, counted in the process's gauge, while the
 * devices are held open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "rdma_stack.h"
#include "transport.h"
#include "transport_impl.h"

#define RING (16u << 10)

/* Stand-ins: the verbs objects are only compared and counted. */
static struct ibv_context device_a, device_b, device_unlisted;
static struct ibv_context *listed[] = { &device_a, &device_b, NULL };
static unsigned int holds, releases;
static struct ibv_pd pds[64];
static struct ibv_mr mrs[128];
static unsigned int pds_used, mrs_used, pds_freed, mrs_freed;
static int64_t gauge;

static int fake_dealloc_pd(struct ibv_pd *pd)
{
	(void)pd;
	pds_freed++;
	return 0;
}

static int fake_dereg_mr(struct ibv_mr *mr)
{
	(void)mr;
	mrs_freed++;
	return 0;
}

static struct ibv_context **fake_get_devices(int *count)
{
	if (count)
		*count = 2;
	holds++;
	return listed;
}

static void fake_free_devices(struct ibv_context **list)
{
	assert_ptr_equal(list, listed);
	releases++;
}

static void count(int64_t pinned_delta)
{
	gauge += pinned_delta;
}

static struct ring_mem ring(uint32_t size)
{
	void *buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(buf != MAP_FAILED);
	assert_true(mrs_used < sizeof(mrs) / sizeof(mrs[0]));
	return (struct ring_mem){ .buf = buf,
				  .mr = &mrs[mrs_used++],
				  .size = size };
}

/* A transport on device whose queue pair is gone, rings of size. */
struct fixture {
	struct rdma_cm_id id;
	struct transport t;
};

static struct transport *closed(struct fixture *f, struct ibv_context *device,
				uint32_t size)
{
	memset(f, 0, sizeof(*f));
	f->id.verbs = device;
	f->t.id = &f->id;
	f->t.ring_start = size;
	assert_true(pds_used < sizeof(pds) / sizeof(pds[0]));
	f->t.pd = &pds[pds_used++];
	f->t.rx = ring(size);
	f->t.tx = ring(size);
	return &f->t;
}

static int setup(void **state)
{
	(void)state;
	ibv.dealloc_pd = fake_dealloc_pd;
	ibv.dereg_mr = fake_dereg_mr;
	rdmacm.get_devices = fake_get_devices;
	rdmacm.free_devices = fake_free_devices;
	transport_count_spares(count);
	spare_drop_all();
	spare_tick(clock_ms() + 3600 * 1000); /* lets the devices go */
	pds_used = mrs_used = pds_freed = mrs_freed = 0;
	holds = releases = 0;
	gauge = 0;
	return 0;
}

static void next_transport_on_the_device_gets_the_domain_and_rings(void **s)
{
	struct fixture old, fresh = { 0 };
	struct transport *t = closed(&old, &device_a, RING);
	struct ibv_pd *pd = t->pd;
	uint8_t *rx = t->rx.buf, *tx = t->tx.buf;

	(void)s;
	assert_true(spare_keep(t));
	assert_null(t->pd);
	assert_int_equal(t->rx.size, 0);
	assert_true(spare_take(&fresh.t, &device_a, RING));
	assert_ptr_equal(fresh.t.pd, pd);
	assert_ptr_equal(fresh.t.rx.buf, rx);
	assert_ptr_equal(fresh.t.tx.buf, tx);
	assert_int_equal(fresh.t.rx.size, RING);
	assert_false(spare_take(&fresh.t, &device_a, RING));
}

static void spare_serves_only_its_own_device(void **s)
{
	struct fixture old, fresh = { 0 };

	(void)s;
	assert_true(spare_keep(closed(&old, &device_a, RING)));
	assert_false(spare_take(&fresh.t, &device_b, RING));
	assert_true(spare_take(&fresh.t, &device_a, RING));
}

static void spare_serves_only_rings_of_its_size(void **s)
{
	struct fixture old, fresh = { 0 };

	(void)s;
	assert_true(spare_keep(closed(&old, &device_a, RING)));
	assert_false(spare_take(&fresh.t, &device_a, 2 * RING));
}

static void resized_rings_are_not_kept(void **s)
{
	struct fixture grown, offering, shrunk;
	struct transport *t;

	(void)s;
	t = closed(&grown, &device_a, RING);
	t->ring_start = RING / 2;
	assert_false(spare_keep(t));
	t = closed(&offering, &device_a, RING);
	t->rx_offer = ring(2 * RING);
	assert_false(spare_keep(t));
	t = closed(&shrunk, &device_a, RING);
	t->tx_prev = ring(RING);
	assert_false(spare_keep(t));
	assert_non_null(t->pd); /* the caller frees what was not kept */
}

static void spares_go_after_a_second(void **s)
{
	struct fixture old, fresh = { 0 };
	int64_t now = clock_ms();

	(void)s;
	assert_true(spare_keep(closed(&old, &device_a, RING)));
	assert_true(spare_tick(now) > 0);
	assert_int_equal(pds_freed, 0);
	assert_int_equal(spare_tick(now + 1000), -1);
	assert_int_equal(pds_freed, 1);
	assert_int_equal(mrs_freed, 2);
	assert_false(spare_take(&fresh.t, &device_a, RING));
}

static void spares_pin_a_mebibyte_at_most(void **s)
{
	struct fixture f[40];
	unsigned int i, kept = 0;

	(void)s;
	/* 32 KiB a spare: 32 of them make a mebibyte. */
	for (i = 0; i < 40; i++) {
		struct transport *t = closed(&f[i], &device_a, RING);

		if (spare_keep(t)) {
			kept++;
			continue;
		}
		ring_mem_free(&t->rx);
		ring_mem_free(&t->tx);
	}
	assert_int_equal(kept, 32);
	assert_int_equal(gauge, 1 << 20);
}

static void gauge_counts_the_bytes_spares_pin(void **s)
{
	struct fixture old, fresh = { 0 };

	(void)s;
	assert_true(spare_keep(closed(&old, &device_a, RING)));
	assert_int_equal(gauge, 2 * RING);
	assert_true(spare_take(&fresh.t, &device_a, RING));
	assert_int_equal(gauge, 0);
	fresh.id.verbs = &device_a;
	fresh.t.id = &fresh.id;
	fresh.t.ring_start = RING;
	assert_true(spare_keep(&fresh.t));
	assert_int_equal(gauge, 2 * RING);
	assert_true(spare_drop_all());
	assert_int_equal(gauge, 0);
	assert_false(spare_drop_all());
}

static void dropping_a_device_frees_only_its_spares(void **s)
{
	struct fixture a, b, fresh = { 0 };

	(void)s;
	assert_true(spare_keep(closed(&a, &device_a, RING)));
	assert_true(spare_keep(closed(&b, &device_b, RING)));
	transport_drop_spares(&device_a);
	assert_int_equal(pds_freed, 1);
	assert_false(spare_take(&fresh.t, &device_a, RING));
	assert_true(spare_take(&fresh.t, &device_b, RING));
}

static void
devices_are_held_from_the_first_spare_to_a_second_after_the_last(void **s)
{
	struct fixture first, second, fresh = { 0 };
	int64_t now = clock_ms();

	(void)s;
	assert_true(spare_keep(closed(&first, &device_a, RING)));
	assert_true(spare_take(&fresh.t, &device_a, RING));
	assert_true(spare_keep(closed(&second, &device_b, RING)));
	assert_int_equal(holds, 1);
	assert_true(spare_take(&fresh.t, &device_b, RING));
	assert_true(spare_tick(now) > 0);
	assert_int_equal(releases, 0);
	assert_int_equal(spare_tick(now + 1000), -1);
	assert_int_equal(releases, 1);
}

static void device_outside_the_hold_keeps_no_spare(void **s)
{
	struct fixture old;

	(void)s;
	assert_false(spare_keep(closed(&old, &device_unlisted, RING)));
}

static void removed_device_keeps_no_spare_while_the_devices_are_held(void **s)
{
	struct fixture a, again, b;

	(void)s;
	assert_true(spare_keep(closed(&a, &device_a, RING)));
	transport_drop_spares(&device_a);
	assert_false(spare_keep(closed(&again, &device_a, RING)));
	assert_true(spare_keep(closed(&b, &device_b, RING)));
}

static void fork_child_frees_none_of_the_parents_spares(void **s)
{
	struct fixture old, fresh = { 0 };
	int status;
	pid_t pid;

	(void)s;
	assert_true(spare_keep(closed(&old, &device_a, RING)));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		spare_fork_child();
		_exit(!spare_take(&fresh.t, &device_a, RING) &&
				      !spare_drop_all() && pds_freed == 0
			      ? 0
			      : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(spare_take(&fresh.t, &device_a, RING));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(
			next_transport_on_the_device_gets_the_domain_and_rings,
			setup),
		cmocka_unit_test_setup(spare_serves_only_its_own_device, setup),
		cmocka_unit_test_setup(spare_serves_only_rings_of_its_size,
				       setup),
		cmocka_unit_test_setup(resized_rings_are_not_kept, setup),
		cmocka_unit_test_setup(spares_go_after_a_second, setup),
		cmocka_unit_test_setup(spares_pin_a_mebibyte_at_most, setup),
		cmocka_unit_test_setup(gauge_counts_the_bytes_spares_pin,
				       setup),
		cmocka_unit_test_setup(dropping_a_device_frees_only_its_spares,
				       setup),
		cmocka_unit_test_setup(
			devices_are_held_from_the_first_spare_to_a_second_after_the_last,
			setup),
		cmocka_unit_test_setup(device_outside_the_hold_keeps_no_spare,
				       setup),
		cmocka_unit_test_setup(
			removed_device_keeps_no_spare_while_the_devices_are_held,
			setup),
		cmocka_unit_test_setup(
			fork_child_frees_none_of_the_parents_spares, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
