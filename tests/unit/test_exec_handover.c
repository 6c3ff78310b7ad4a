// SPDX-License-Identifier: MIT
/*
 * Specification of the list of connections an exec hands over
 * (src/exec_handover.c): what the new image decodes is what the old one
 * encoded, anything else in the variable voids the whole list, only the
 * process with the list's pid takes it, and each connection is claimed
 * once.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "exec_handover.h"
#include "share.h"

static const uint8_t v4_mapped[16] = {
	[10] = 0xff, [11] = 0xff, [12] = 10, [15] = 2
};

static struct exec_handover_entry sample[2] = {
	{ .source = { .family = AF_INET6, .port = 41234 }, .local_port = 8080 },
	{ .source = { .family = AF_INET6, .port = 5 }, .local_port = 65535 },
};

static struct exec_handover sample_list(pid_t pid, int64_t deadline)
{
	struct exec_handover h = { .pid = pid,
				   .deadline_ms = deadline,
				   .count = 2,
				   .entries = sample };

	memcpy(sample[0].source.addr, v4_mapped, 16);
	memset(sample[1].source.addr, 0xfe, 16);
	return h;
}

/* The value of "NAME=value". */
static const char *value_of(const char *var)
{
	return strchr(var, '=') + 1;
}

static void decodes_what_was_encoded(void **state)
{
	struct exec_handover in = sample_list(1234, 99999), out;
	char *var = exec_handover_encode(&in);
	size_t i;

	assert_non_null(var);
	assert_int_equal(exec_handover_decode(value_of(var), &out), 0);
	assert_int_equal(out.pid, 1234);
	assert_int_equal(out.deadline_ms, 99999);
	assert_int_equal(out.count, 2);
	for (i = 0; i < 2; i++) {
		assert_int_equal(out.entries[i].local_port,
				 in.entries[i].local_port);
		assert_int_equal(out.entries[i].source.port,
				 in.entries[i].source.port);
		assert_int_equal(out.entries[i].source.family,
				 in.entries[i].source.family);
		assert_memory_equal(out.entries[i].source.addr,
				    in.entries[i].source.addr, 16);
		assert_false(out.entries[i].claimed);
	}
	free(out.entries);
	free(var);
}

static void encodes_nothing_for_an_empty_list(void **state)
{
	struct exec_handover h = { .pid = 1 };

	assert_null(exec_handover_encode(&h));
}

static void rejects(const char *value)
{
	struct exec_handover h;

	assert_int_equal(exec_handover_decode(value, &h), -EINVAL);
	assert_int_equal(h.count, 0);
	assert_null(h.entries);
}

#define ADDR "00000000000000000000ffff0a000002"

static void rejects_malformed_lists(void **state)
{
	rejects("");
	rejects("1/5/100");			 /* no entry */
	rejects("2/5/100,80/10/" ADDR "/9");	 /* version */
	rejects("1/0/100,80/10/" ADDR "/9");	 /* pid 0 */
	rejects("1/5/100,0/10/" ADDR "/9");	 /* port 0 */
	rejects("1/5/100,80/10/" ADDR "/65536"); /* port too big */
	rejects("1/5/100,80/3/" ADDR "/9");	 /* family */
	rejects("1/5/100,80/10/" ADDR "/9,");	 /* empty entry */
	rejects("1/5/100,80/10/" ADDR "/9x");	 /* trailing */
	rejects("1/5/100,80/10/00000000000000000000ffff0a00/9"); /* short */
	rejects("1/5/100,80/10/" ADDR "0/9");			 /* long */
	rejects("1/5/100,80/10/00000000000000000000FFFF0a000002/9");
	rejects("1/5/99999999999999999999,80/10/" ADDR "/9"); /* overflow */
	rejects("1/-5/100,80/10/" ADDR "/9");
}

static void accepts_a_well_formed_entry(void **state)
{
	struct exec_handover h;

	assert_int_equal(exec_handover_decode("1/5/100,80/10/" ADDR "/9", &h),
			 0);
	assert_int_equal(h.count, 1);
	assert_int_equal(h.entries[0].local_port, 80);
	assert_int_equal(h.entries[0].source.port, 9);
	assert_memory_equal(h.entries[0].source.addr, v4_mapped, 16);
	free(h.entries);
}

#define LIB "/usr/lib/libroceshim.so"

static void env_replaces_an_earlier_list_and_keeps_the_rest(void **state)
{
	char *envp[] = { "A=1", EXEC_HANDOVER_ENV "=1/1/1,1/2/" ADDR "/1",
			 EXEC_HANDOVER_ENV "X=kept",
			 "LD_PRELOAD=/other/libroceshim.so", NULL };
	char *var = strdup(EXEC_HANDOVER_ENV "=new");
	char **env = exec_handover_env(envp, &var, 1, LIB);

	assert_non_null(env);
	assert_ptr_equal(env[0], var);
	assert_string_equal(env[1], "A=1");
	assert_string_equal(env[2], EXEC_HANDOVER_ENV "X=kept");
	assert_string_equal(env[3], "LD_PRELOAD=/other/libroceshim.so");
	assert_null(env[4]);
	exec_handover_env_free(env);
}

static void env_carries_both_variables_and_drops_stale_ones(void **state)
{
	char *envp[] = { SHARE_ENV "=7", "A=1",
			 EXEC_HANDOVER_ENV "=1/1/1,1/2/" ADDR "/1",
			 "LD_PRELOAD=" LIB, NULL };
	char *vars[] = { strdup(EXEC_HANDOVER_ENV "=new"),
			 strdup(SHARE_ENV "=9") };
	char **env = exec_handover_env(envp, vars, 2, LIB);

	assert_non_null(env);
	assert_ptr_equal(env[0], vars[0]);
	assert_ptr_equal(env[1], vars[1]);
	assert_string_equal(env[2], "A=1");
	assert_string_equal(env[3], "LD_PRELOAD=" LIB);
	assert_null(env[4]);
	exec_handover_env_free(env);
}

static void env_of_an_empty_environment_preloads_the_library(void **state)
{
	char *var = strdup(EXEC_HANDOVER_ENV "=new");
	char **env = exec_handover_env(NULL, &var, 1, LIB);

	assert_non_null(env);
	assert_ptr_equal(env[0], var);
	assert_string_equal(env[1], "LD_PRELOAD=" LIB);
	assert_null(env[2]);
	exec_handover_env_free(env);
}

static void env_puts_the_library_before_other_preloads(void **state)
{
	char *envp[] = { "LD_PRELOAD=libfoo.so", "B=2", NULL };
	char *var = strdup(EXEC_HANDOVER_ENV "=new");
	char **env = exec_handover_env(envp, &var, 1, LIB);

	assert_non_null(env);
	assert_ptr_equal(env[0], var);
	assert_string_equal(env[1], "LD_PRELOAD=" LIB " libfoo.so");
	assert_string_equal(env[2], "B=2");
	assert_null(env[3]);
	exec_handover_env_free(env);
}

static void load_env(pid_t pid, int64_t deadline)
{
	struct exec_handover h = sample_list(pid, deadline);
	char *var = exec_handover_encode(&h);

	assert_non_null(var);
	assert_int_equal(setenv(EXEC_HANDOVER_ENV, value_of(var), 1), 0);
	free(var);
	exec_handover_load();
	assert_null(getenv(EXEC_HANDOVER_ENV));
}

static void another_process_list_is_removed_and_ignored(void **state)
{
	load_env(getpid() + 1, clock_ms() + 60000);
	assert_false(exec_handover_waiting());
	assert_false(exec_handover_claim(&sample[0].source, 8080));
}

static void expired_list_is_removed_and_ignored(void **state)
{
	load_env(getpid(), clock_ms() - 1);
	assert_false(exec_handover_waiting());
}

static void malformed_list_is_removed_and_ignored(void **state)
{
	assert_int_equal(setenv(EXEC_HANDOVER_ENV, "1/x", 1), 0);
	exec_handover_load();
	assert_null(getenv(EXEC_HANDOVER_ENV));
	assert_false(exec_handover_waiting());
}

static void each_connection_is_claimed_once_on_its_port(void **state)
{
	load_env(getpid(), clock_ms() + 60000);
	assert_true(exec_handover_waiting());
	assert_false(exec_handover_claim(&sample[0].source, 8081));
	assert_true(exec_handover_claim(&sample[0].source, 8080));
	assert_false(exec_handover_claim(&sample[0].source, 8080));
	assert_true(exec_handover_waiting());
	assert_true(exec_handover_claim(&sample[1].source, 65535));
	assert_false(exec_handover_waiting());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decodes_what_was_encoded),
		cmocka_unit_test(encodes_nothing_for_an_empty_list),
		cmocka_unit_test(rejects_malformed_lists),
		cmocka_unit_test(accepts_a_well_formed_entry),
		cmocka_unit_test(
			env_replaces_an_earlier_list_and_keeps_the_rest),
		cmocka_unit_test(
			env_carries_both_variables_and_drops_stale_ones),
		cmocka_unit_test(
			env_of_an_empty_environment_preloads_the_library),
		cmocka_unit_test(env_puts_the_library_before_other_preloads),
		cmocka_unit_test(another_process_list_is_removed_and_ignored),
		cmocka_unit_test(expired_list_is_removed_and_ignored),
		cmocka_unit_test(malformed_list_is_removed_and_ignored),
		cmocka_unit_test(each_connection_is_claimed_once_on_its_port),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
