// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "device.h"
#include "fd_room.h"
#include "hostinfo.h"
#include "log.h"
#include "rdma_stack.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const struct config *probe_cfg;
static enum roceshim_reason status;

/*
 * librdmacm opens each device once per process, with two descriptors (its
 * commands' and its asynchronous events') at the lowest free numbers,
 * where they would shift the numbers of the program's next sockets and
 * files.  So roceshim has it open them now, and moves both out of the
 * program's way (fd_room.h) before anything uses them: the library reads
 * them from the context at each call.  Not where the program loaded
 * librdmacm itself: its own code may hold those contexts.
 */
struct ibv_context **device_hold(void)
{
	struct ibv_context **devs;
	bool private = rdma_stack_private();
	int i, count = 0;

	/* With the limit raised: a device that fails to open is never retried.
	 */
	fd_room_enter();
	devs = rdmacm.get_devices(&count);
	for (i = 0; private && devs && i < count && devs[i]; i++) {
		devs[i]->cmd_fd = fd_room_keep(devs[i]->cmd_fd);
		if (devs[i]->async_fd >= 0)
			devs[i]->async_fd = fd_room_keep(devs[i]->async_fd);
	}
	fd_room_leave();
	return devs;
}

void device_release(struct ibv_context **devs)
{
	if (devs)
		rdmacm.free_devices(devs);
}

static void open_devices(void)
{
	if (rdma_stack_private())
		device_release(device_hold());
}

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
	if (status == ROCESHIM_REASON_NONE)
		open_devices();
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
