/* SPDX-License-Identifier: MIT */
/*
 * Removed RDMA devices let go.  librdmacm keeps a device's context open
 * until a new listing of the devices misses it and nothing of the process
 * uses it (device.h), and a driver that cannot take its contexts away from
 * the processes that hold them (rxe, siw) lets its device go only once
 * every one of them is closed: `rdma link delete` waits.  Every process
 * with RDMA holds every device's context (device_hold() at the probe), so
 * the progress thread listens for the kernel's announcement that a verbs
 * device is gone and lists the devices again then.  It does so too when
 * one is added: the new device's context is then opened there, and its
 * descriptors moved out of the program's way before anything uses them,
 * not by the connection manager at the program's lowest free numbers.
 * A removal that leaves no device at all is not let go: librdmacm keeps
 * its list as it was when a listing finds nothing.
 *
 * Contract: device_watch_start() is idempotent and thread safe, and does
 * nothing unless the progress thread runs and roceshim opened the RDMA
 * libraries itself; a failure leaves the contexts held until exit, as
 * before.  device_uevent_changes_verbs() reads one kernel uevent message
 * of len bytes, which may be malformed or unterminated: whether a verbs
 * device was added or removed.
 */
#ifndef ROCESHIM_DEVICE_WATCH_H
#define ROCESHIM_DEVICE_WATCH_H

#include <stdbool.h>
#include <stddef.h>

void device_watch_start(void);
bool device_uevent_changes_verbs(const char *msg, size_t len);

/*
 * In a fork child: the watch was the parent's progress thread's; its
 * socket goes unless the child shares the parent's descriptors.
 */
void device_watch_fork_child(bool fds_shared);

#endif /* ROCESHIM_DEVICE_WATCH_H */
