// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "fd_room.h"
#include "log.h"
#include "real.h"

int log_level = LOG_LEVEL_WARN;

/* Atomic: the log file's descriptor, or stderr's. */
static int log_fd = STDERR_FILENO;

static const char *const level_names[] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARN] = "warning",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

/* Expands "%p" to the pid; anything else is copied as it is. */
static void expand_path(char *out, size_t size, const char *path)
{
	size_t n = 0;

	for (; *path && n + 1 < size; path++) {
		if (path[0] == '%' && path[1] == 'p') {
			int len = snprintf(out + n, size - n, "%d", getpid());

			if (len < 0 || (size_t)len >= size - n)
				break;
			n += len;
			path++;
			continue;
		}
		out[n++] = *path;
	}
	out[n] = '\0';
}

void log_open(int level, const char *path)
{
	char expanded[4096];
	int fd;

	log_level = level;
	/* Nothing to close or open: libc's functions may wait (shim.c). */
	if (__atomic_load_n(&log_fd, __ATOMIC_ACQUIRE) == STDERR_FILENO &&
	    (!path || !*path))
		return;
	real_init();
	fd = __atomic_exchange_n(&log_fd, STDERR_FILENO, __ATOMIC_ACQ_REL);
	if (fd != STDERR_FILENO)
		real.close(fd);
	if (!path || !*path)
		return;
	expand_path(expanded, sizeof(expanded), path);
	fd = open(expanded, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_msg(LOG_LEVEL_WARN,
			"ROCESHIM_LOG_FILE='%s': cannot open (%s); logging to "
			"stderr",
			expanded, strerror(errno));
		return;
	}
	/* Out of the way of the numbers the program opens and closes. */
	__atomic_store_n(&log_fd, fd_room_keep(fd), __ATOMIC_RELEASE);
}

int log_file_fd(void)
{
	int fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);

	return fd == STDERR_FILENO ? -1 : fd;
}

void log_file_move(void)
{
	int fd = log_file_fd(), copy;

	if (fd < 0)
		return;
	copy = fd_room_dup(fd);
	if (copy < 0)
		return;
	/* The program's dup2() onto fd closes it. */
	if (!__atomic_compare_exchange_n(&log_fd, &fd, copy, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		real.close(copy);
}

/*
 * A line for stderr, unless stderr is a TCP socket: inetd and socket
 * activation put the program's connection there, or its listener, and
 * the line would reach the peer as data, or SIGPIPE end the program.
 * Another socket (journald's stream) takes it without SIGPIPE.
 */
static void write_stderr(const char *line, int n)
{
	socklen_t len = sizeof(int);
	int domain;

	if (real.getsockopt(STDERR_FILENO, SOL_SOCKET, SO_DOMAIN, &domain,
			    &len)) {
		(void)!real.write(STDERR_FILENO, line, n);
		return;
	}
	if (domain != AF_INET && domain != AF_INET6)
		(void)!real.send(STDERR_FILENO, line, n, MSG_NOSIGNAL);
}

/*
 * The proleptic Gregorian date of a day counted from 1970-01-01, in
 * eras of 400 years (146097 days) that start on a 1 March, so that the
 * leap day ends its year.  Plain arithmetic: gmtime_r() may take glibc's
 * time-zone lock, which a signal handler that logs could find held.
 */
static void civil_date(int64_t days, int64_t *year, int *month, int *day)
{
	int64_t era, doe, yoe, doy, mp;

	days += 719468; /* 0000-03-01 to 1970-01-01 */
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*day = (int)(doy - (153 * mp + 2) / 5 + 1);
	*month = (int)(mp < 10 ? mp + 3 : mp - 9);
	*year = yoe + era * 400 + (*month <= 2);
}

int log_format_utc(int64_t unix_ms, char *out, size_t size)
{
	int64_t secs = unix_ms / 1000, ms = unix_ms % 1000, days, year;
	int month, day, sod;

	if (ms < 0) {
		ms += 1000;
		secs--;
	}
	days = secs / 86400;
	sod = (int)(secs % 86400);
	if (sod < 0) {
		sod += 86400;
		days--;
	}
	civil_date(days, &year, &month, &day);
	return snprintf(out, size, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ",
			(long long)year, month, day, sod / 3600, sod / 60 % 60,
			sod % 60, (int)ms);
}

/* Where a line goes to a file, it begins with its time. */
static int line_head(char *line, size_t size, bool timed)
{
	int n = 0;

	if (timed) {
		n = log_format_utc(clock_unix_ms(), line, size);
		if (n < 0 || (size_t)n >= size - 1)
			n = 0;
		else
			line[n++] = ' ';
	}
	return n;
}

void log_msg(int level, const char *fmt, ...)
{
	char line[1024];
	int saved_errno = errno;
	va_list ap;
	int n, m, fd;

	if (level < LOG_LEVEL_ERROR || level > LOG_LEVEL_DEBUG)
		level = LOG_LEVEL_ERROR;
	/* Before any wrapped call: the configuration's own warnings. */
	real_init();
	/* A log line that cannot be written is dropped, never retried. */
	fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
	n = line_head(line, sizeof(line), fd != STDERR_FILENO);
	m = snprintf(line + n, sizeof(line) - n, "roceshim[%d]: %s: ", getpid(),
		     level_names[level]);
	n += m > 0 ? m : 0;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (fd == STDERR_FILENO && real.getsockopt && real.send)
		write_stderr(line, n);
	else if (real.write)
		(void)!real.write(fd, line, n);
	errno = saved_errno;
}
