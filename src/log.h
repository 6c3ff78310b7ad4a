/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per message, "roceshim[pid]: level: text", written with
 * a single write() so lines from several threads never interleave.  A
 * TCP socket on stderr (inetd's, socket activation's) gets none: it is
 * the program's connection or listener.
 *
 * Contract: log_open() sets the level and destination (NULL or "" means
 * stderr; "%p" in the path becomes the pid) and may be called again after
 * fork; log_msg() never changes errno and never fails the caller; every
 * function is thread safe.
 */
#ifndef ROCESHIM_LOG_H
#define ROCESHIM_LOG_H

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
