// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "hostinfo.h"

#define CAP_IPC_LOCK_BIT 14

bool hostinfo_has_uverbs(void)
{
	DIR *dir = opendir(HOSTINFO_UVERBS_CLASS);
	struct dirent *entry;
	bool found = false;

	if (!dir)
		return false;
	while (!found && (entry = readdir(dir)))
		found = !strncmp(entry->d_name, "uverbs", 6);
	closedir(dir);
	return found;
}

bool hostinfo_may_lock_without_limit(void)
{
	unsigned long long caps = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return caps & (1ull << CAP_IPC_LOCK_BIT);
}

int hostinfo_fd_table_size(void)
{
	int size = -1;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "FDSize: %d", &size) == 1)
			break;
	fclose(f);
	return size;
}
