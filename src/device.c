// SPDX-License-Identifier: MIT
#include <infiniband/verbs.h>
#include <pthread.h>

#include "device.h"
#include "log.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int devices;

static void probe(void)
{
	struct ibv_device **list = ibv_get_device_list(&devices);

	if (!list) {
		devices = 0;
		return;
	}
	log_info("%d RDMA device(s) found", devices);
	ibv_free_device_list(list);
}

int device_count(void)
{
	pthread_once(&probe_once, probe);
	return devices;
}
