// SPDX-License-Identifier: MIT
/*
 * Specification of the log's lines: in a file, each begins with its UTC
 * time, to the millisecond, in ISO 8601; the dates are the proleptic
 * Gregorian calendar's on either side of 1970 and across leap days.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "log.h"
#include "real.h"

static void expect_utc(int64_t unix_ms, const char *want)
{
	char got[32];

	assert_int_equal(log_format_utc(unix_ms, got, sizeof(got)),
			 (int)strlen(want));
	assert_string_equal(got, want);
}

static void the_epoch_is_its_first_millisecond(void **state)
{
	(void)state;
	expect_utc(0, "1970-01-01T00:00:00.000Z");
}

static void a_leap_day_and_the_day_after_it(void **state)
{
	(void)state;
	expect_utc(951782400000, "2000-02-29T00:00:00.000Z");
	expect_utc(951868799999, "2000-02-29T23:59:59.999Z");
	expect_utc(951868800000, "2000-03-01T00:00:00.000Z");
}

static void a_century_without_a_leap_day(void **state)
{
	(void)state;
	expect_utc(4107542399000, "2100-02-28T23:59:59.000Z");
	expect_utc(4107542400000, "2100-03-01T00:00:00.000Z");
}

static void a_time_before_the_epoch(void **state)
{
	(void)state;
	expect_utc(-1, "1969-12-31T23:59:59.999Z");
	expect_utc(-86400000, "1969-12-31T00:00:00.000Z");
}

static void a_year_end(void **state)
{
	(void)state;
	expect_utc(1798761599123, "2026-12-31T23:59:59.123Z");
	expect_utc(1798761600000, "2027-01-01T00:00:00.000Z");
}

/* gmtime_r() agrees on a day of every month over four centuries. */
static void every_month_agrees_with_gmtime(void **state)
{
	char want[64];
	struct tm tm;
	time_t t;

	(void)state;
	for (t = -6000000000; t < 8000000000; t += 2629743 + 3601) {
		assert_non_null(gmtime_r(&t, &tm));
		snprintf(want, sizeof(want),
			 "%04d-%02d-%02dT%02d:%02d:%02d.000Z",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec);
		expect_utc((int64_t)t * 1000, want);
	}
}

static void read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void a_file_s_line_begins_with_its_time(void **state)
{
	char path[] = "/tmp/test_log.XXXXXX", line[512], head[64], want[64];
	int64_t before, after;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	before = clock_unix_ms();
	log_open(LOG_LEVEL_INFO, path);
	log_msg(LOG_LEVEL_INFO, "hello %d", 7);
	log_open(LOG_LEVEL_WARN, NULL);
	after = clock_unix_ms();
	read_file(path, line, sizeof(line));
	unlink(path);
	snprintf(want, sizeof(want), " roceshim[%d]: info: hello 7\n",
		 getpid());
	assert_int_equal(strlen(line), 24 + strlen(want));
	assert_string_equal(line + 24, want);
	/* Its time is between the two readings of the clock. */
	log_format_utc(before, head, sizeof(head));
	assert_true(memcmp(line, head, 24) >= 0);
	log_format_utc(after, head, sizeof(head));
	assert_true(memcmp(line, head, 24) <= 0);
}

static void a_line_leaves_errno_alone(void **state)
{
	(void)state;
	errno = EXDEV;
	log_msg(LOG_LEVEL_ERROR, "a line on stderr");
	assert_int_equal(errno, EXDEV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_epoch_is_its_first_millisecond),
		cmocka_unit_test(a_leap_day_and_the_day_after_it),
		cmocka_unit_test(a_century_without_a_leap_day),
		cmocka_unit_test(a_time_before_the_epoch),
		cmocka_unit_test(a_year_end),
		cmocka_unit_test(every_month_agrees_with_gmtime),
		cmocka_unit_test(a_file_s_line_begins_with_its_time),
		cmocka_unit_test(a_line_leaves_errno_alone),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
