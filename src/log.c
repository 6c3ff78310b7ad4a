// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "real.h"

int log_level = LOG_LEVEL_WARN;

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
	if (log_fd != STDERR_FILENO) {
		real.close(log_fd);
		log_fd = STDERR_FILENO;
	}
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
	log_fd = fd;
}

void log_msg(int level, const char *fmt, ...)
{
	char line[1024];
	int saved_errno = errno;
	va_list ap;
	int n, m;

	if (level < LOG_LEVEL_ERROR || level > LOG_LEVEL_DEBUG)
		level = LOG_LEVEL_ERROR;
	n = snprintf(line, sizeof(line), "roceshim[%d]: %s: ", getpid(),
		     level_names[level]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* Before any wrapped call: the configuration's own warnings. */
	real_init();
	/* A log line that cannot be written is dropped, never retried. */
	if (real.write)
		(void)!real.write(log_fd, line, n);
	errno = saved_errno;
}
