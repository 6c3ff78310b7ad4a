// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procinfo.h"

/*
 * stdio, not open, read and close: those are interposed, and library code
 * must not go through its own wrappers (stdio's own calls do not).
 */
static ssize_t read_proc_file(pid_t pid, const char *name, char *buf,
			      size_t size)
{
	char path[64];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	if (!n)
		return -1;
	buf[n] = '\0';
	return n;
}

uint64_t procinfo_start_ticks(pid_t pid)
{
	char buf[1024];
	char *p;
	int field;

	if (read_proc_file(pid, "stat", buf, sizeof(buf)) <= 0)
		return 0;
	/* The command name may hold spaces and ')': skip to the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* After ')' come fields 3, 4, ...; starttime is field 22. */
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

void procinfo_command(pid_t pid, char *buf, size_t size)
{
	ssize_t n = read_proc_file(pid, "cmdline", buf, size);
	ssize_t i;

	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	for (i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
}
