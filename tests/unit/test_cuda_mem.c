// SPDX-License-Identifier: MIT
/* Specification of the memory classifier (src/cuda_mem.c) against the CUDA
 * driver's test double (tests/cuda/cuda_double.h), which this program links
 * as libcuda.so.1: what the driver says of a buffer is its class, and
 * nothing is remembered from one socket call to the next (each classify()
 * here is one call).  CUDA is initialised after the
 * first test and stays so: the tests run in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "cuda_double.h"
#include "cuda_mem.h"
#include "real.h"
#include "stats.h"

#define LEN (1u << 20)

/*
 * The classifier looks for the driver lazily, at most once a second
 * (cuda_mem.h): it has FIND_MS to find the double.
 */
#define FIND_MS 3000

/* The memory the tests say CUDA allocated: only its address matters. */
static char arena[LEN];

static bool becomes_active(void)
{
	int64_t deadline = clock_ms() + FIND_MS;

	while (!cuda_mem_active())
		if (clock_ms() > deadline)
			return false;
	return true;
}

static struct mem_info classify(const void *p)
{
	struct mem_info info;

	assert_true(becomes_active());
	cuda_mem_call_begin();
	cuda_mem_classify(p, &info);
	return info;
}

static int cuda_initialised(void **state)
{
	return cuInit(0);
}

/* The arena freed, and classification on again. */
static int restored(void **state)
{
	cuda_double_unmark(arena);
	cuda_mem_configure(true);
	return 0;
}

static void not_initialised_cuda_is_pageable(void **state)
{
	uint64_t asked = cuda_double_queries();
	int64_t deadline = clock_ms() + FIND_MS;

	cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	/* Until the classifier has found the driver and asked it. */
	do {
		cuda_mem_call_begin();
		assert_int_equal(cuda_mem_class(arena), ROCESHIM_MEM_PAGEABLE);
	} while (cuda_double_queries() == asked && clock_ms() < deadline);
	assert_true(cuda_double_queries() > asked);
}

static void pinned_buffer_is_pinned_with_its_allocation(void **state)
{
	uint64_t id = cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	struct mem_info info = classify(arena);

	assert_int_equal(info.cls, ROCESHIM_MEM_PINNED);
	assert_int_equal(info.buffer_id, id);
	assert_int_equal(info.start, (uintptr_t)arena);
	assert_int_equal(info.size, LEN);
}

static void interior_pointer_reports_whole_allocation(void **state)
{
	uint64_t id = cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	struct mem_info info = classify(arena + LEN / 2 + 3);

	assert_int_equal(info.cls, ROCESHIM_MEM_PINNED);
	assert_int_equal(info.buffer_id, id);
	assert_int_equal(info.start, (uintptr_t)arena);
	assert_int_equal(info.size, LEN);
}

static void device_buffer_is_device(void **state)
{
	cuda_double_mark(arena, LEN, CUDA_DOUBLE_DEVICE);
	assert_int_equal(classify(arena).cls, ROCESHIM_MEM_DEVICE);
}

static void managed_buffer_is_managed(void **state)
{
	cuda_double_mark(arena, LEN, CUDA_DOUBLE_MANAGED);
	assert_int_equal(classify(arena).cls, ROCESHIM_MEM_MANAGED);
}

static void freed_buffer_is_pageable_again(void **state)
{
	struct mem_info info;

	cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	assert_int_equal(classify(arena).cls, ROCESHIM_MEM_PINNED);
	cuda_double_unmark(arena);
	info = classify(arena);
	assert_int_equal(info.cls, ROCESHIM_MEM_PAGEABLE);
	assert_int_equal(info.buffer_id, 0);
}

static void reallocation_gets_a_new_buffer_id(void **state)
{
	uint64_t first = cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	uint64_t second;

	assert_int_equal(classify(arena).buffer_id, first);
	cuda_double_unmark(arena);
	second = cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	assert_int_not_equal(second, first);
	assert_int_equal(classify(arena).buffer_id, second);
}

static void disabled_classification_is_pageable(void **state)
{
	uint64_t queries;

	cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	cuda_mem_configure(false);
	queries = cuda_double_queries();
	assert_false(cuda_mem_active());
	assert_int_equal(cuda_mem_class(arena), ROCESHIM_MEM_PAGEABLE);
	assert_int_equal(cuda_double_queries(), queries);
}

static void child_of_a_process_with_cuda_never_asks_the_driver(void **state)
{
	int status;
	pid_t pid;

	cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	/* Nothing has looked for the driver since: as before a first look. */
	cuda_mem_configure(true);
	cuda_mem_fork_prepare();
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		uint64_t asked = cuda_double_queries();

		cuda_mem_fork_child();
		cuda_mem_call_begin();
		_exit(cuda_mem_class(arena) == ROCESHIM_MEM_PAGEABLE &&
				      !cuda_mem_active_now() &&
				      cuda_double_queries() == asked
			      ? 0
			      : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void a_buffer_is_asked_about_once_per_call(void **state)
{
	struct mem_info info;
	uint64_t asked;

	cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	classify(arena);
	asked = cuda_double_queries();
	cuda_mem_classify(arena, &info);
	cuda_mem_classify(arena + 8, &info);
	cuda_mem_classify(arena, &info);
	assert_int_equal(cuda_double_queries(), asked + 1);
	assert_int_equal(info.cls, ROCESHIM_MEM_PINNED);
}

static void next_call_asks_again(void **state)
{
	cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	assert_int_equal(classify(arena).cls, ROCESHIM_MEM_PINNED);
	cuda_double_unmark(arena);
	assert_int_equal(classify(arena).cls, ROCESHIM_MEM_PAGEABLE);
}

static void fork_child_sees_pageable(void **state)
{
	int status;
	pid_t pid;

	cuda_double_mark(arena, LEN, CUDA_DOUBLE_PINNED);
	assert_int_equal(classify(arena).cls, ROCESHIM_MEM_PINNED);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		cuda_mem_fork_child();
		_exit(cuda_mem_class(arena) == ROCESHIM_MEM_PAGEABLE ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Statistics published, CUDA's driver loaded, and the next look due. */
static void counting_may_begin(void)
{
	struct roceshim_stats_endpoint none = { 0 };

	stats_configure(true, 4);
	assert_true(stats_row_open(3, ROCESHIM_ROLE_ACTIVE, ROCESHIM_ROW_OPEN,
				   ROCESHIM_REASON_NONE, &none, &none) >= 0);
	cuda_mem_configure(true);
}

/* The calls of this thread until cuda_mem_counting() says yes, or 1000. */
static int calls_until_counting(void)
{
	int calls = 1;

	while (!cuda_mem_counting() && calls < 1000)
		calls++;
	return calls;
}

static void counting_begins_within_64_calls_of_a_thread(void **state)
{
	counting_may_begin();
	assert_true(calls_until_counting() <= 64);
}

static void once_counting_every_call_counts(void **state)
{
	int i;

	counting_may_begin();
	assert_true(calls_until_counting() <= 64);
	for (i = 0; i < 200; i++)
		assert_true(cuda_mem_counting());
}

static void fork_child_stops_counting_at_its_first_call(void **state)
{
	int status;
	pid_t pid;

	counting_may_begin();
	assert_true(calls_until_counting() <= 64);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		cuda_mem_fork_child();
		_exit(cuda_mem_counting() ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(cuda_mem_counting());
}

#define initialised_test(f) \
	cmocka_unit_test_setup_teardown(f, cuda_initialised, restored)

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* First: nothing has called cuInit() yet. */
		cmocka_unit_test_teardown(not_initialised_cuda_is_pageable,
					  restored),
		initialised_test(pinned_buffer_is_pinned_with_its_allocation),
		initialised_test(interior_pointer_reports_whole_allocation),
		initialised_test(device_buffer_is_device),
		initialised_test(managed_buffer_is_managed),
		initialised_test(freed_buffer_is_pageable_again),
		initialised_test(reallocation_gets_a_new_buffer_id),
		initialised_test(disabled_classification_is_pageable),
		initialised_test(a_buffer_is_asked_about_once_per_call),
		initialised_test(next_call_asks_again),
		initialised_test(fork_child_sees_pageable),
		initialised_test(
			child_of_a_process_with_cuda_never_asks_the_driver),
		initialised_test(counting_begins_within_64_calls_of_a_thread),
		initialised_test(once_counting_every_call_counts),
		initialised_test(fork_child_stops_counting_at_its_first_call),
	};

	int failed;

	real_init();
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	stats_shutdown(-1);
	return failed;
}
