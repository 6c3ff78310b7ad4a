/* SPDX-License-Identifier: MIT */
/*
 * Folding the events of one epoll_wait() that share an epoll_data: an
 * upgraded connection is several entries in the program's set, all with
 * its epoll_data, and must come back as one event, as its socket would.
 *
 * Contract: event_fold() rewrites events[0..n) in place into one event per
 * distinct data.u64, in the order of their first occurrence, each with
 * the union of the masks that carried its data, and returns how many
 * there are.  It takes time linear in n for up to EVENT_FOLD_HASHED
 * distinct datas and allocates nothing (it runs in the program's
 * epoll_wait, perhaps in a signal handler).
 */
#ifndef ROCESHIM_EVENT_FOLD_H
#define ROCESHIM_EVENT_FOLD_H

#include <sys/epoll.h>

/* Distinct datas found in O(1) each; those past it, by a scan. */
#define EVENT_FOLD_HASHED 1024

int event_fold(struct epoll_event *events, int n);

#endif
