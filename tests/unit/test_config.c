// SPDX-License-Identifier: MIT
/* Specification of ROCESHIM_* parsing: defaults, every accepted spelling,
 * and one warning (and the default kept) for every malformed value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "log.h"

static const char *env_name;
static const char *env_value;
static const char *env_name2;
static const char *env_value2;
static int warnings;
static char last_warning[512];

static const char *lookup(const char *name)
{
	if (env_name && !strcmp(name, env_name))
		return env_value;
	if (env_name2 && !strcmp(name, env_name2))
		return env_value2;
	return NULL;
}

static void warn(const char *line)
{
	warnings++;
	strncpy(last_warning, line, sizeof(last_warning) - 1);
}

static void load_with(struct config *cfg, const char *name, const char *value)
{
	env_name = name;
	env_value = value;
	env_name2 = NULL;
	warnings = 0;
	last_warning[0] = '\0';
	config_load(cfg, lookup, warn);
}

static void assert_warned_once_about(const char *name, const char *value)
{
	assert_int_equal(warnings, 1);
	assert_non_null(strstr(last_warning, name));
	assert_non_null(strstr(last_warning, value));
	assert_non_null(strstr(last_warning, "using"));
}

static void defaults_apply_when_nothing_is_set(void **state)
{
	struct config cfg;

	load_with(&cfg, NULL, NULL);
	assert_int_equal(warnings, 0);
	assert_true(cfg.enabled);
	assert_true(cfg.stats);
	assert_int_equal(cfg.log_level, LOG_LEVEL_WARN);
	assert_string_equal(cfg.log_file, "");
	assert_int_equal(cfg.include.count, 0);
	assert_int_equal(cfg.exclude.count, 0);
	assert_int_equal(cfg.stats_rows, CONFIG_STATS_ROWS_DEFAULT);
	assert_int_equal(cfg.zerocopy_kb, CONFIG_ZEROCOPY_KB_DEFAULT);
	assert_int_equal(cfg.ring_kb, 256);
	assert_int_equal(cfg.ring_start_kb, 64);
}

static void enable_accepts_every_boolean_spelling(void **state)
{
	static const char *const on[] = { "1",	"yes", "true",
					  "on", "YES", "True" };
	static const char *const off[] = { "0", "no", "false", "off", "OFF" };
	struct config cfg;
	size_t i;

	for (i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		load_with(&cfg, "ROCESHIM_ENABLE", on[i]);
		assert_true(cfg.enabled);
		assert_int_equal(warnings, 0);
	}
	for (i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		load_with(&cfg, "ROCESHIM_ENABLE", off[i]);
		assert_false(cfg.enabled);
		assert_int_equal(warnings, 0);
	}
}

static void malformed_boolean_warns_once_and_keeps_default(void **state)
{
	static const char *const bad[] = { "",	 "maybe",      "2",  " 1",
					   "1 ", "yes please", "-1", "0x1" };
	struct config cfg;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_with(&cfg, "ROCESHIM_STATS", bad[i]);
		assert_true(cfg.stats);
		assert_warned_once_about("ROCESHIM_STATS", bad[i]);
	}
}

static void log_level_accepts_names_and_numbers(void **state)
{
	static const struct {
		const char *text;
		int level;
	} cases[] = {
		{ "none", LOG_LEVEL_NONE }, { "error", LOG_LEVEL_ERROR },
		{ "warn", LOG_LEVEL_WARN }, { "warning", LOG_LEVEL_WARN },
		{ "info", LOG_LEVEL_INFO }, { "DEBUG", LOG_LEVEL_DEBUG },
		{ "0", LOG_LEVEL_NONE },    { "4", LOG_LEVEL_DEBUG },
	};
	struct config cfg;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		load_with(&cfg, "ROCESHIM_LOG_LEVEL", cases[i].text);
		assert_int_equal(cfg.log_level, cases[i].level);
		assert_int_equal(warnings, 0);
	}
}

static void malformed_log_level_warns_once_and_keeps_warn(void **state)
{
	static const char *const bad[] = { "",	 "5",
					   "-1", "verbose",
					   "3x", "99999999999999999999" };
	struct config cfg;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_with(&cfg, "ROCESHIM_LOG_LEVEL", bad[i]);
		assert_int_equal(cfg.log_level, LOG_LEVEL_WARN);
		assert_warned_once_about("ROCESHIM_LOG_LEVEL", bad[i]);
	}
}

static void stats_rows_in_range_is_used(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_STATS_ROWS", "16");
	assert_int_equal(cfg.stats_rows, 16);
	load_with(&cfg, "ROCESHIM_STATS_ROWS", "65536");
	assert_int_equal(cfg.stats_rows, 65536);
	assert_int_equal(warnings, 0);
}

static void malformed_stats_rows_warns_once_and_keeps_default(void **state)
{
	static const char *const bad[] = {
		"",   "15",   "65537", "abc",  "1k",
		"-5", " 100", "100 ",  "+100", "99999999999999999999"
	};
	struct config cfg;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_with(&cfg, "ROCESHIM_STATS_ROWS", bad[i]);
		assert_int_equal(cfg.stats_rows, CONFIG_STATS_ROWS_DEFAULT);
		assert_warned_once_about("ROCESHIM_STATS_ROWS", bad[i]);
	}
}

static void log_file_is_taken_verbatim(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_LOG_FILE", "/tmp/roceshim.%p.log");
	assert_string_equal(cfg.log_file, "/tmp/roceshim.%p.log");
	assert_int_equal(warnings, 0);
}

static void overlong_log_file_warns_and_keeps_stderr(void **state)
{
	char path[CONFIG_PATH_MAX + 10];
	struct config cfg;

	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	load_with(&cfg, "ROCESHIM_LOG_FILE", path);
	assert_string_equal(cfg.log_file, "");
	assert_int_equal(warnings, 1);
	assert_non_null(strstr(last_warning, "ROCESHIM_LOG_FILE"));
}

static void rdma_libraries_default_to_their_sonames(void **state)
{
	struct config cfg;

	load_with(&cfg, NULL, NULL);
	assert_string_equal(cfg.libibverbs, "libibverbs.so.1");
	assert_string_equal(cfg.librdmacm, "librdmacm.so.1");
}

static void rdma_library_names_are_taken_verbatim(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_LIBRDMACM", "/opt/rdma/lib/librdmacm.so.1");
	assert_string_equal(cfg.librdmacm, "/opt/rdma/lib/librdmacm.so.1");
	assert_string_equal(cfg.libibverbs, "libibverbs.so.1");
	assert_int_equal(warnings, 0);
}

static void empty_rdma_library_name_warns_and_keeps_the_soname(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_LIBIBVERBS", "");
	assert_string_equal(cfg.libibverbs, "libibverbs.so.1");
	assert_warned_once_about("ROCESHIM_LIBIBVERBS", "libibverbs.so.1");
}

static void overlong_rdma_library_name_warns_and_keeps_the_soname(void **state)
{
	char path[CONFIG_PATH_MAX + 10];
	struct config cfg;

	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	load_with(&cfg, "ROCESHIM_LIBRDMACM", path);
	assert_string_equal(cfg.librdmacm, "librdmacm.so.1");
	assert_warned_once_about("ROCESHIM_LIBRDMACM", "librdmacm.so.1");
}

static void include_and_exclude_rules_are_parsed(void **state)
{
	struct config cfg;

	env_name = "ROCESHIM_INCLUDE";
	env_value = "10.0.0.0/8, [fd00::]/8:80";
	env_name2 = "ROCESHIM_EXCLUDE";
	env_value2 = "*:22";
	warnings = 0;
	config_load(&cfg, lookup, warn);
	assert_int_equal(warnings, 0);
	assert_int_equal(cfg.include.count, 2);
	assert_int_equal(cfg.exclude.count, 1);
	assert_int_equal(cfg.exclude.rule[0].port_lo, 22);
}

static void assert_excludes_everything(const struct config *cfg)
{
	assert_int_equal(cfg->exclude.count, 1);
	assert_int_equal(cfg->exclude.rule[0].prefix_bits, 0);
	assert_int_equal(cfg->exclude.rule[0].port_lo, 0);
	assert_int_equal(cfg->exclude.rule[0].port_hi, 65535);
}

static void malformed_include_excludes_every_connection(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_INCLUDE", "10.0.0.0/8,10.1.2.300");
	assert_warned_once_about("ROCESHIM_INCLUDE", "10.1.2.300");
	assert_excludes_everything(&cfg);
}

static void malformed_exclude_excludes_every_connection(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_EXCLUDE", "1.2.3.4:99999");
	assert_warned_once_about("ROCESHIM_EXCLUDE", "1.2.3.4:99999");
	assert_excludes_everything(&cfg);
}

static void too_many_rules_exclude_every_connection(void **state)
{
	char text[ADDR_RULES_MAX * 8 + 16] = "";
	struct config cfg;
	int i;

	for (i = 0; i <= ADDR_RULES_MAX; i++)
		strcat(text, i ? ",*:1" : "*:1");
	load_with(&cfg, "ROCESHIM_INCLUDE", text);
	assert_int_equal(warnings, 1);
	assert_non_null(strstr(last_warning, "more than"));
	assert_excludes_everything(&cfg);
}

static void rdma_path_is_on_unless_switched_off(void **state)
{
	struct config cfg;

	load_with(&cfg, NULL, NULL);
	assert_true(cfg.rdma);
	load_with(&cfg, "ROCESHIM_RDMA", "0");
	assert_false(cfg.rdma);
	load_with(&cfg, "ROCESHIM_RDMA", "1");
	assert_true(cfg.rdma);
}

static void rdma_path_keeps_default_for_malformed_value(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_RDMA", "sometimes");
	assert_true(cfg.rdma);
	assert_warned_once_about("ROCESHIM_RDMA", "sometimes");
}

static void ring_kb_takes_powers_of_two_only(void **state)
{
	static const char *const bad[] = { "0",	      "2",   "3", "1000",
					   "1048576", "abc", "",  "256k" };
	struct config cfg;
	size_t i;

	load_with(&cfg, "ROCESHIM_RING_KB", "4");
	assert_int_equal(cfg.ring_kb, 4);
	load_with(&cfg, "ROCESHIM_RING_KB", "524288");
	assert_int_equal(cfg.ring_kb, 524288);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_with(&cfg, "ROCESHIM_RING_KB", bad[i]);
		assert_int_equal(cfg.ring_kb, CONFIG_RING_KB_DEFAULT);
		assert_warned_once_about("ROCESHIM_RING_KB", bad[i]);
	}
}

static void ring_start_kb_takes_powers_of_two_only(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_RING_START_KB", "256");
	assert_int_equal(cfg.ring_start_kb, 256);
	load_with(&cfg, "ROCESHIM_RING_START_KB", "24");
	assert_int_equal(cfg.ring_start_kb, CONFIG_RING_START_KB_DEFAULT);
	assert_warned_once_about("ROCESHIM_RING_START_KB", "24");
}

static void handshake_timers_are_range_checked(void **state)
{
	struct config cfg;

	load_with(&cfg, "ROCESHIM_CONNECT_TIMEOUT_MS", "250");
	assert_int_equal(cfg.connect_timeout_ms, 250);
	load_with(&cfg, "ROCESHIM_CONNECT_TIMEOUT_MS", "5");
	assert_int_equal(cfg.connect_timeout_ms,
			 CONFIG_CONNECT_TIMEOUT_MS_DEFAULT);
	assert_warned_once_about("ROCESHIM_CONNECT_TIMEOUT_MS", "5");
	load_with(&cfg, "ROCESHIM_NEGATIVE_CACHE_S", "0");
	assert_int_equal(cfg.negative_cache_s, 0);
	load_with(&cfg, "ROCESHIM_NEGATIVE_CACHE_S", "86401");
	assert_int_equal(cfg.negative_cache_s, CONFIG_NEGATIVE_CACHE_S_DEFAULT);
	assert_warned_once_about("ROCESHIM_NEGATIVE_CACHE_S", "86401");
}

/*
 * An unsigned variable stored at offset in struct config takes min and
 * max, and keeps def (with one warning) for each value in bad.
 */
static void assert_uint_range(const char *name, size_t offset, unsigned int min,
			      unsigned int max, unsigned int def,
			      const char *const *bad)
{
	struct config cfg;
	char text[16];

	snprintf(text, sizeof(text), "%u", min);
	load_with(&cfg, name, text);
	assert_int_equal(*(unsigned int *)((char *)&cfg + offset), min);
	snprintf(text, sizeof(text), "%u", max);
	load_with(&cfg, name, text);
	assert_int_equal(*(unsigned int *)((char *)&cfg + offset), max);
	for (; *bad; bad++) {
		load_with(&cfg, name, *bad);
		assert_int_equal(*(unsigned int *)((char *)&cfg + offset), def);
		assert_warned_once_about(name, *bad);
	}
}

static void spin_time_is_range_checked(void **state)
{
	static const char *const bad[] = { "1000001", "-5", NULL };

	assert_uint_range("ROCESHIM_SPIN_US", offsetof(struct config, spin_us),
			  0, 1000000, CONFIG_SPIN_US_DEFAULT, bad);
}

static void zerocopy_threshold_is_range_checked(void **state)
{
	static const char *const bad[] = { "1048577", "64k", NULL };

	assert_uint_range("ROCESHIM_ZEROCOPY_KB",
			  offsetof(struct config, zerocopy_kb), 0, 1048576,
			  CONFIG_ZEROCOPY_KB_DEFAULT, bad);
}

static void cuda_classification_is_on_unless_switched_off(void **state)
{
	struct config cfg;

	load_with(&cfg, NULL, NULL);
	assert_true(cfg.cuda);
	load_with(&cfg, "ROCESHIM_CUDA", "0");
	assert_false(cfg.cuda);
	load_with(&cfg, "ROCESHIM_CUDA", "maybe");
	assert_true(cfg.cuda);
	assert_warned_once_about("ROCESHIM_CUDA", "maybe");
}

static void pinned_zerocopy_threshold_is_range_checked(void **state)
{
	static const char *const bad[] = { "1048577", "-1", NULL };

	assert_uint_range("ROCESHIM_PINNED_ZEROCOPY_KB",
			  offsetof(struct config, pinned_zerocopy_kb), 0,
			  1048576, CONFIG_PINNED_ZEROCOPY_KB_DEFAULT, bad);
}

static void reg_cache_cap_is_range_checked(void **state)
{
	static const char *const bad[] = { "1048577", "1g", NULL };

	assert_uint_range("ROCESHIM_REG_CACHE_MB",
			  offsetof(struct config, reg_cache_mb), 0, 1048576, 0,
			  bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_apply_when_nothing_is_set),
		cmocka_unit_test(enable_accepts_every_boolean_spelling),
		cmocka_unit_test(
			malformed_boolean_warns_once_and_keeps_default),
		cmocka_unit_test(log_level_accepts_names_and_numbers),
		cmocka_unit_test(malformed_log_level_warns_once_and_keeps_warn),
		cmocka_unit_test(stats_rows_in_range_is_used),
		cmocka_unit_test(
			malformed_stats_rows_warns_once_and_keeps_default),
		cmocka_unit_test(log_file_is_taken_verbatim),
		cmocka_unit_test(overlong_log_file_warns_and_keeps_stderr),
		cmocka_unit_test(rdma_libraries_default_to_their_sonames),
		cmocka_unit_test(rdma_library_names_are_taken_verbatim),
		cmocka_unit_test(
			empty_rdma_library_name_warns_and_keeps_the_soname),
		cmocka_unit_test(
			overlong_rdma_library_name_warns_and_keeps_the_soname),
		cmocka_unit_test(include_and_exclude_rules_are_parsed),
		cmocka_unit_test(malformed_include_excludes_every_connection),
		cmocka_unit_test(malformed_exclude_excludes_every_connection),
		cmocka_unit_test(too_many_rules_exclude_every_connection),
		cmocka_unit_test(rdma_path_is_on_unless_switched_off),
		cmocka_unit_test(rdma_path_keeps_default_for_malformed_value),
		cmocka_unit_test(ring_kb_takes_powers_of_two_only),
		cmocka_unit_test(ring_start_kb_takes_powers_of_two_only),
		cmocka_unit_test(handshake_timers_are_range_checked),
		cmocka_unit_test(spin_time_is_range_checked),
		cmocka_unit_test(zerocopy_threshold_is_range_checked),
		cmocka_unit_test(cuda_classification_is_on_unless_switched_off),
		cmocka_unit_test(pinned_zerocopy_threshold_is_range_checked),
		cmocka_unit_test(reg_cache_cap_is_range_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
