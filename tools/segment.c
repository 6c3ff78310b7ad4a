// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "procinfo.h"
#include "segment.h"

#define SHM_DIR	    "/dev/shm"
#define SHM_PREFIX  "roceshim-"
#define MAX_SEGMENT (256u << 20)

void segment_path(pid_t pid, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s%d", SHM_DIR, SHM_PREFIX, (int)pid);
}

bool segment_pid_alive(pid_t pid, uint64_t start_ticks)
{
	if (kill(pid, 0) && errno != EPERM)
		return false;
	/* The same pid with another start time is another process. */
	return !start_ticks || procinfo_start_ticks(pid) == start_ticks;
}

static int validate_header(const struct roceshim_stats_header *h, size_t size,
			   const char *path)
{
	if (h->magic != ROCESHIM_STATS_MAGIC) {
		fprintf(stderr,
			"roceshim-stat: %s: not a roceshim segment "
			"(or still being created)\n",
			path);
		return -EINVAL;
	}
	if (h->layout_version != ROCESHIM_STATS_LAYOUT_VERSION) {
		fprintf(stderr,
			"roceshim-stat: %s: layout version %u, this tool reads "
			"version %u; use the roceshim-stat of the same "
			"roceshim "
			"release as the program\n",
			path, h->layout_version, ROCESHIM_STATS_LAYOUT_VERSION);
		return -EPROTO;
	}
	if (h->header_size != sizeof(*h) ||
	    h->row_size != sizeof(struct roceshim_stats_row) ||
	    h->row_count >
		    (size - sizeof(*h)) / sizeof(struct roceshim_stats_row)) {
		fprintf(stderr, "roceshim-stat: %s: corrupt header\n", path);
		return -EINVAL;
	}
	return 0;
}

/* Copies one row under its sequence count; false if it kept changing. */
static bool copy_row(const struct roceshim_stats_row *src,
		     struct roceshim_stats_row *dst)
{
	int tries;

	for (tries = 0; tries < 100; tries++) {
		uint32_t seq = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;
		memcpy(dst, src, sizeof(*dst));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&src->seq, __ATOMIC_RELAXED) == seq)
			return true;
	}
	return false;
}

int segment_read(pid_t pid, struct snapshot *snap, bool quiet)
{
	const struct roceshim_stats_row *rows;
	char path[64];
	struct stat st;
	void *map;
	unsigned int i;
	int fd, ret;

	memset(snap, 0, sizeof(*snap));
	segment_path(pid, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (!quiet)
			fprintf(stderr, "roceshim-stat: %s: %s\n", path,
				strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(snap->header) ||
	    st.st_size > MAX_SEGMENT) {
		fprintf(stderr, "roceshim-stat: %s: unexpected size\n", path);
		close(fd);
		return -EINVAL;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		fprintf(stderr, "roceshim-stat: %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	memcpy(&snap->header, map, sizeof(snap->header));
	ret = validate_header(&snap->header, st.st_size, path);
	if (ret)
		goto out;
	snap->header.command[sizeof(snap->header.command) - 1] = '\0';
	snap->rows = calloc(snap->header.row_count + 1, sizeof(*snap->rows));
	if (!snap->rows) {
		ret = -ENOMEM;
		goto out;
	}
	rows = (const void *)((const char *)map + sizeof(snap->header));
	for (i = 0; i < snap->header.row_count; i++) {
		struct roceshim_stats_row *row = &snap->rows[snap->row_count];

		if (!copy_row(&rows[i], row) || row->state == ROCESHIM_ROW_FREE)
			continue;
		snap->row_count++;
	}
	/* Totals after rows: the sum of the rows never exceeds them. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	memcpy(&snap->header.global,
	       &((const struct roceshim_stats_header *)map)->global,
	       sizeof(snap->header.global));
	snap->alive = segment_pid_alive(pid, snap->header.start_ticks);
out:
	munmap(map, st.st_size);
	return ret;
}

void segment_free(struct snapshot *snap)
{
	free(snap->rows);
	snap->rows = NULL;
}

int segment_list_pids(pid_t **out)
{
	DIR *dir = opendir(SHM_DIR);
	struct dirent *de;
	pid_t *pids = NULL;
	int n = 0, cap = 0;

	if (!dir)
		return 0;
	while ((de = readdir(dir))) {
		char *end;
		long pid;

		if (strncmp(de->d_name, SHM_PREFIX, strlen(SHM_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(SHM_PREFIX), &end, 10);
		if (*end || pid <= 0)
			continue;
		if (n == cap) {
			pid_t *grown;

			cap = cap ? cap * 2 : 16;
			grown = realloc(pids, cap * sizeof(*pids));
			if (!grown)
				break;
			pids = grown;
		}
		pids[n++] = pid;
	}
	closedir(dir);
	for (int i = 1; i < n; i++) {
		pid_t v = pids[i];
		int j = i;

		for (; j > 0 && pids[j - 1] > v; j--)
			pids[j] = pids[j - 1];
		pids[j] = v;
	}
	*out = pids;
	return n;
}
