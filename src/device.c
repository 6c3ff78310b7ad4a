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
 * The listed contexts whose descriptors were moved, with the command
 * descriptor each got (under fd_room_enter()).  Moving them again would
 * close numbers that other threads may be about to use (rxe's doorbell is
 * a write to the command descriptor); a context freed and another made at
 * its address has a descriptor of its own.  Past MOVED_MAX contexts, the
 * others stay where they were opened.
 */
#define MOVED_MAX 64

static struct {
	const struct ibv_context *ctx;
	int cmd_fd;
} moved[MOVED_MAX];
static unsigned int moved_count;

static bool moved_before(const struct ibv_context *ctx)
{
	unsigned int i;

	for (i = 0; i < moved_count; i++)
		if (moved[i].ctx == ctx && moved[i].cmd_fd == ctx->cmd_fd)
			return true;
	return false;
}

static bool listed(struct ibv_context **devs, int count,
		   const struct ibv_context *ctx)
{
	int i;

	for (i = 0; i < count; i++)
		if (devs[i] == ctx)
			return true;
	return false;
}

/* Drops the contexts not in devs: librdmacm lists no closed device. */
static void forget_unlisted(struct ibv_context **devs, int count)
{
	unsigned int i = 0;

	while (i < moved_count) {
		if (listed(devs, count, moved[i].ctx))
			i++;
		else
			moved[i] = moved[--moved_count];
	}
}

static void move_out_of_the_way(struct ibv_context *ctx)
{
	if (moved_before(ctx) || moved_count == MOVED_MAX)
		return;
	ctx->cmd_fd = fd_room_keep(ctx->cmd_fd);
	if (ctx->async_fd >= 0)
		ctx->async_fd = fd_room_keep(ctx->async_fd);
	moved[moved_count].ctx = ctx;
	moved[moved_count++].cmd_fd = ctx->cmd_fd;
}

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
	if (private && devs)
		forget_unlisted(devs, count);
	for (i = 0; private && devs && i < count && devs[i]; i++)
		move_out_of_the_way(devs[i]);
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
