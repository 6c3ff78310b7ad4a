// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "device.h"
#include "hostinfo.h"
#include "log.h"
#include "rdma_stack.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const struct config *probe_cfg;
static enum roceshim_reason status;

static void probe(void)
{
	struct ibv_device **list;
	int devices = 0;

	if (!hostinfo_has_uverbs()) {
		log_info("no RDMA device in " HOSTINFO_UVERBS_CLASS);
		status = ROCESHIM_REASON_NO_DEVICE;
		return;
	}
	if (rdma_stack_load(probe_cfg)) {
		status = ROCESHIM_REASON_NO_RDMA_LIBS;
		return;
	}
	list = ibv.get_device_list(&devices);
	if (list)
		ibv.free_device_list(list);
	log_info("%d RDMA device(s) found", list ? devices : 0);
	status = list && devices > 0 ? ROCESHIM_REASON_NONE
				     : ROCESHIM_REASON_NO_DEVICE;
}

enum roceshim_reason device_status(const struct config *cfg)
{
	/* The probe's calls must not show in the program's errno. */
	int err = errno;

	__atomic_store_n(&probe_cfg, cfg, __ATOMIC_RELAXED);
	pthread_once(&probe_once, probe);
	errno = err;
	return status;
}
