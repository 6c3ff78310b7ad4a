/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per message, "roceshim[pid]: level: text", written with
 * a single write() so lines from several threads never interleave.  A
 * TCP socket on stderr (inetd's, socket activation's) gets none: it is
 * the program's connection or listener.  In a log file (ROCESHIM_LOG_FILE)
 * each line begins with its UTC time to the millisecond
 * ("2026-12-07T19:45:01.123Z "), so that the files of several processes
 * merge in order; on stderr, among the program's own lines, it does not.
 *
 * Contract: log_open() sets the level and destination (NULL or "" means
 * stderr; "%p" in the path becomes the pid) and may be called again after
 * fork; log_msg() never changes errno and never fails the caller; every
 * function is thread safe.
 */
#ifndef ROCESHIM_LOG_H
#define ROCESHIM_LOG_H
#include <stddef.h>
#include <stdint.h>

enum log_level {
	LOG_LEVEL_NONE = 0,
	LOG_LEVEL_ERROR = 1,
	LOG_LEVEL_WARN = 2,
	LOG_LEVEL_INFO = 3,
	LOG_LEVEL_DEBUG = 4
};

extern int log_level;

void log_open(int level, const char *path);
/*
 * The log file's descriptor (above the program's limit where it can be),
 * or -1 when the log goes to stderr.  The program never opened it: the
 * interposed close family leaves it open, and log_file_move() moves it
 * before a dup2() onto its number, so that no log line reaches a file the
 * program put there.
 */
int log_file_fd(void);
void log_file_move(void);
void log_msg(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * Writes unix_ms (milliseconds since 1970, UTC) as ISO 8601, as the log
 * lines' times are ("1970-01-01T00:00:00.000Z"); returns snprintf()'s
 * count.  Async-signal-safe: no locale, no time-zone lock.
 */
int log_format_utc(int64_t unix_ms, char *out, size_t size);

#define log_error(...) log_at(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_at(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...)  log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_at(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* The level test stays inline so that a disabled message costs one load. */
#define log_at(level, ...)                           \
	do {                                         \
		if ((level) <= log_level)            \
			log_msg(level, __VA_ARGS__); \
	} while (0)

#endif /* ROCESHIM_LOG_H */
