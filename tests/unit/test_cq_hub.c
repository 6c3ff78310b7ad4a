// SPDX-License-Identifier: MIT
/*
 * Specification of the completion hubs (src/cq_hub.c): a device's queues
 * spread over up to CQ_HUB_PER_DEVICE hubs, each new one to the hub with
 * the fewest, or to one there when no other can be made; a drain takes
 * only its own hub's events; the last queue out closes a hub; the
 * progress thread's watch is counted; a fork child starts afresh.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cq_hub.h"
#include "progress.h"
#include "rdma_stack.h"
#include "real.h"

/* Stand-ins: devices are only compared. */
static struct ibv_context devices[CQ_HUB_SLOTS / CQ_HUB_PER_DEVICE + 1];

/*
 * A fake channel: its fd is a semaphore eventfd, readable while events
 * wait; the events themselves are the queue tags in pending.
 */
struct fake_channel {
	struct ibv_comp_channel ch;
	void *pending[16];
	unsigned int count;
};

static unsigned int channels_made, channels_destroyed, acks;
static int watched_fd = -1;
static unsigned int watch_adds, watch_dels;
static struct progress_watcher *watcher;

static struct ibv_comp_channel *fake_create_comp_channel(struct ibv_context *c)
{
	struct fake_channel *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->ch.context = c;
	f->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	assert_true(f->ch.fd >= 0);
	channels_made++;
	return &f->ch;
}

static struct ibv_comp_channel *
failing_create_comp_channel(struct ibv_context *c)
{
	(void)c;
	errno = EMFILE;
	return NULL;
}

static int fake_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	close(ch->fd);
	free(ch);
	channels_destroyed++;
	return 0;
}

static int fake_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq,
			     void **cq_context)
{
	struct fake_channel *f = (struct fake_channel *)ch;
	uint64_t v;

	if (read(ch->fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	assert_true(f->count > 0);
	*cq_context = f->pending[0];
	memmove(f->pending, f->pending + 1, --f->count * sizeof(void *));
	*cq = NULL;
	return 0;
}

static void fake_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	(void)cq;
	acks += n;
}

int __wrap_progress_add(int fd, uint32_t events, struct progress_watcher *w);
void __wrap_progress_del(int fd);

int __wrap_progress_add(int fd, uint32_t events, struct progress_watcher *w)
{
	assert_int_equal(events, EPOLLIN);
	watched_fd = fd;
	watcher = w;
	watch_adds++;
	return 0;
}

void __wrap_progress_del(int fd)
{
	assert_int_equal(fd, watched_fd);
	watched_fd = -1;
	watch_dels++;
}

/* A completion event on h's channel, for the queue tagged tag. */
static void raise_event(struct cq_hub *h, void *tag)
{
	struct fake_channel *f = (struct fake_channel *)cq_hub_channel(h);

	assert_true(f->count < 16);
	f->pending[f->count++] = tag;
	assert_int_equal(write(f->ch.fd, &(uint64_t){ 1 }, 8), 8);
}

static void *served[16];
static unsigned int serve_count;

static void record(void *cq_context, void *arg)
{
	(void)arg;
	assert_true(serve_count < 16);
	served[serve_count++] = cq_context;
}

static int setup(void **state)
{
	(void)state;
	real_init();
	ibv.create_comp_channel = fake_create_comp_channel;
	ibv.destroy_comp_channel = fake_destroy_comp_channel;
	ibv.get_cq_event = fake_get_cq_event;
	ibv.ack_cq_events = fake_ack_cq_events;
	channels_made = channels_destroyed = acks = serve_count = 0;
	watch_adds = watch_dels = 0;
	watched_fd = -1;
	return 0;
}

static struct cq_hub *get(struct ibv_context *ctx)
{
	struct cq_hub *h;
	int err;

	h = cq_hub_get(ctx, &err);
	assert_non_null(h);
	assert_int_equal(err, 0);
	return h;
}

static void first_queue_of_a_device_makes_a_non_blocking_hub(void **state)
{
	struct cq_hub *h;

	(void)state;
	h = get(&devices[0]);
	assert_int_equal(channels_made, 1);
	assert_true(real.fcntl(cq_hub_fd(h), F_GETFL) & O_NONBLOCK);
	assert_ptr_equal(cq_hub_channel(h)->context, &devices[0]);
	cq_hub_put(h);
	assert_int_equal(channels_destroyed, 1);
}

static void
each_queue_gets_a_hub_of_its_own_up_to_the_device_limit(void **state)
{
	struct cq_hub *h[CQ_HUB_PER_DEVICE];
	unsigned int i, j;

	(void)state;
	for (i = 0; i < CQ_HUB_PER_DEVICE; i++) {
		h[i] = get(&devices[0]);
		for (j = 0; j < i; j++)
			assert_ptr_not_equal(h[i], h[j]);
	}
	assert_int_equal(channels_made, CQ_HUB_PER_DEVICE);
	for (i = 0; i < CQ_HUB_PER_DEVICE; i++)
		cq_hub_put(h[i]);
	assert_int_equal(channels_destroyed, CQ_HUB_PER_DEVICE);
}

static void past_the_limit_a_queue_joins_the_least_used_hub(void **state)
{
	struct cq_hub *h[CQ_HUB_PER_DEVICE], *extra[2];
	unsigned int i;

	(void)state;
	for (i = 0; i < CQ_HUB_PER_DEVICE; i++)
		h[i] = get(&devices[0]);
	extra[0] = get(&devices[0]);
	/* Its hub has two queues now, the others one: it is not chosen. */
	extra[1] = get(&devices[0]);
	assert_int_equal(channels_made, CQ_HUB_PER_DEVICE);
	assert_ptr_not_equal(extra[0], extra[1]);
	cq_hub_put(extra[0]);
	cq_hub_put(extra[1]);
	for (i = 0; i < CQ_HUB_PER_DEVICE; i++)
		cq_hub_put(h[i]);
	assert_int_equal(channels_destroyed, CQ_HUB_PER_DEVICE);
}

static void a_hub_left_empty_is_closed_and_its_slot_made_anew(void **state)
{
	struct cq_hub *a, *b;

	(void)state;
	a = get(&devices[0]);
	cq_hub_put(a);
	b = get(&devices[0]);
	assert_int_equal(channels_made, 2);
	assert_int_equal(channels_destroyed, 1);
	cq_hub_put(b);
}

static void devices_do_not_share_hubs(void **state)
{
	struct cq_hub *a, *b;

	(void)state;
	a = get(&devices[0]);
	b = get(&devices[1]);
	assert_ptr_not_equal(a, b);
	assert_ptr_equal(cq_hub_channel(b)->context, &devices[1]);
	cq_hub_put(a);
	cq_hub_put(b);
}

static void a_retired_hub_takes_no_new_queue(void **state)
{
	struct cq_hub *h[CQ_HUB_PER_DEVICE], *after;
	unsigned int i;

	(void)state;
	for (i = 0; i < CQ_HUB_PER_DEVICE; i++) {
		h[i] = get(&devices[0]);
		cq_hub_retire(h[i]);
	}
	/* Retired hubs count for nothing: the device gets a new one. */
	after = get(&devices[0]);
	assert_int_equal(channels_made, CQ_HUB_PER_DEVICE + 1);
	for (i = 0; i < CQ_HUB_PER_DEVICE; i++) {
		assert_ptr_not_equal(after, h[i]);
		cq_hub_put(h[i]);
	}
	cq_hub_put(after);
	assert_int_equal(channels_destroyed, CQ_HUB_PER_DEVICE + 1);
}

static void a_full_table_refuses_with_enospc(void **state)
{
	struct cq_hub *h[CQ_HUB_SLOTS + 1];
	unsigned int i, n = 0, d;
	int err;

	(void)state;
	for (d = 0; d < CQ_HUB_SLOTS / CQ_HUB_PER_DEVICE; d++)
		for (i = 0; i < CQ_HUB_PER_DEVICE; i++)
			h[n++] = get(&devices[d]);
	assert_null(cq_hub_get(&devices[d], &err));
	assert_int_equal(err, -ENOSPC);
	/* A device that has hubs still gets one of them. */
	h[n] = cq_hub_get(&devices[0], &err);
	assert_non_null(h[n]);
	assert_int_equal(channels_made, CQ_HUB_SLOTS);
	cq_hub_put(h[n]);
	for (i = 0; i < n; i++)
		cq_hub_put(h[i]);
}

static void
a_hub_that_cannot_be_made_leaves_the_queue_on_one_there(void **state)
{
	struct cq_hub *a, *b;
	int err;

	(void)state;
	a = get(&devices[0]);
	ibv.create_comp_channel = failing_create_comp_channel;
	b = cq_hub_get(&devices[0], &err);
	assert_ptr_equal(b, a);
	assert_int_equal(err, 0);
	/* A device without one has nothing to fall back on. */
	assert_null(cq_hub_get(&devices[1], &err));
	assert_int_equal(err, -EMFILE);
	cq_hub_put(b);
	cq_hub_put(a);
	assert_int_equal(channels_destroyed, 1);
}

static void a_fork_child_names_no_parent_hub_and_makes_its_own(void **state)
{
	struct cq_hub *h;
	pid_t pid;
	int status;

	(void)state;
	h = get(&devices[0]);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct cq_hub *mine;
		int err;

		cq_hub_fork_child();
		if (cq_hub_fd(h) != -1)
			_exit(1);
		mine = cq_hub_get(&devices[0], &err);
		_exit(mine && !err && cq_hub_fd(mine) >= 0 ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	cq_hub_put(h);
}

static void a_drain_takes_only_its_own_hubs_events(void **state)
{
	struct cq_hub *a, *b;
	int tag_a, tag_b;

	(void)state;
	a = get(&devices[0]);
	b = get(&devices[0]);
	raise_event(a, &tag_a);
	raise_event(b, &tag_b);
	assert_int_equal(cq_hub_drain(cq_hub_slot(a), record, NULL, 0), 1);
	assert_int_equal(serve_count, 1);
	assert_ptr_equal(served[0], &tag_a);
	assert_int_equal(acks, 1);
	assert_int_equal(cq_hub_drain(cq_hub_slot(b), record, NULL, 0), 1);
	assert_ptr_equal(served[1], &tag_b);
	cq_hub_put(a);
	cq_hub_put(b);
}

static void a_drain_with_a_limit_leaves_the_rest(void **state)
{
	struct cq_hub *h;
	int tag1, tag2;

	(void)state;
	h = get(&devices[0]);
	raise_event(h, &tag1);
	raise_event(h, &tag2);
	assert_int_equal(cq_hub_drain(cq_hub_slot(h), record, NULL, 1), 1);
	assert_ptr_equal(served[0], &tag1);
	assert_int_equal(cq_hub_drain(cq_hub_slot(h), record, NULL, 0), 1);
	assert_ptr_equal(served[1], &tag2);
	cq_hub_put(h);
}

static void a_drain_of_an_empty_or_bad_slot_takes_nothing(void **state)
{
	struct cq_hub *h;
	unsigned int slot;

	(void)state;
	h = get(&devices[0]);
	slot = cq_hub_slot(h);
	assert_true(slot < CQ_HUB_SLOTS);
	cq_hub_put(h);
	assert_int_equal(cq_hub_drain(slot, record, NULL, 0), 0);
	assert_int_equal(cq_hub_drain(CQ_HUB_SLOTS, record, NULL, 0), 0);
	assert_int_equal(serve_count, 0);
}

static void the_watch_is_counted_and_drains_its_own_hub(void **state)
{
	struct cq_hub *a, *b;
	int tag_a, tag_b;

	(void)state;
	a = get(&devices[0]);
	b = get(&devices[0]);
	cq_hub_watch(a, true, record, NULL);
	cq_hub_watch(a, true, record, NULL);
	assert_int_equal(watch_adds, 1);
	assert_int_equal(watched_fd, cq_hub_fd(a));
	raise_event(a, &tag_a);
	raise_event(b, &tag_b);
	watcher->fn(watcher, EPOLLIN);
	assert_int_equal(serve_count, 1);
	assert_ptr_equal(served[0], &tag_a);
	cq_hub_watch(a, false, record, NULL);
	assert_int_equal(watch_dels, 0);
	cq_hub_watch(a, false, record, NULL);
	assert_int_equal(watch_dels, 1);
	cq_hub_drain(cq_hub_slot(b), record, NULL, 0);
	cq_hub_put(a);
	cq_hub_put(b);
}

static void the_last_queue_out_ends_the_watch(void **state)
{
	struct cq_hub *h;

	(void)state;
	h = get(&devices[0]);
	cq_hub_watch(h, true, record, NULL);
	cq_hub_put(h);
	assert_int_equal(watch_dels, 1);
	assert_int_equal(channels_destroyed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(
			first_queue_of_a_device_makes_a_non_blocking_hub,
			setup),
		cmocka_unit_test_setup(
			each_queue_gets_a_hub_of_its_own_up_to_the_device_limit,
			setup),
		cmocka_unit_test_setup(
			past_the_limit_a_queue_joins_the_least_used_hub, setup),
		cmocka_unit_test_setup(
			a_hub_left_empty_is_closed_and_its_slot_made_anew,
			setup),
		cmocka_unit_test_setup(devices_do_not_share_hubs, setup),
		cmocka_unit_test_setup(a_retired_hub_takes_no_new_queue, setup),
		cmocka_unit_test_setup(a_full_table_refuses_with_enospc, setup),
		cmocka_unit_test_setup(
			a_hub_that_cannot_be_made_leaves_the_queue_on_one_there,
			setup),
		cmocka_unit_test_setup(
			a_fork_child_names_no_parent_hub_and_makes_its_own,
			setup),
		cmocka_unit_test_setup(a_drain_takes_only_its_own_hubs_events,
				       setup),
		cmocka_unit_test_setup(a_drain_with_a_limit_leaves_the_rest,
				       setup),
		cmocka_unit_test_setup(
			a_drain_of_an_empty_or_bad_slot_takes_nothing, setup),
		cmocka_unit_test_setup(
			the_watch_is_counted_and_drains_its_own_hub, setup),
		cmocka_unit_test_setup(the_last_queue_out_ends_the_watch,
				       setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
