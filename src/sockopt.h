/* SPDX-License-Identifier: MIT */
/*
 * Socket options whose meaning only kernel TCP gives: a read low-water
 * mark, peek offsets, SO_TIMESTAMPING (the kernel's and the card's
 * timestamps, and those of transmission), and signal-driven I/O
 * (O_ASYNC).  A socket with one of them on stays on TCP, and an upgraded
 * connection that gets one moves there.  SO_ZEROCOPY is not one: it
 * means something only to a send with MSG_ZEROCOPY, which moves the
 * connection itself; nor is TCP_INQ, whose count roceshim gives, nor
 * SO_TIMESTAMP and SO_TIMESTAMPNS, whose receive time it gives
 * (upgraded.c).
 *
 * Contract: the answers come from the kernel's own values, so what
 * counts is what the kernel accepted.  errno is left as it was.
 */
#ifndef ROCESHIM_SOCKOPT_H
#define ROCESHIM_SOCKOPT_H

#include <stdbool.h>

/* Whether setting this option may turn on one that only TCP has. */
bool sockopt_tcp_only(int level, int name);

/*
 * The name of the first such option that fd has on, or NULL.  listener:
 * fd listens, and only what its connections inherit counts.
 */
const char *sockopt_tcp_only_on(int fd, bool listener);

/* Whether the option is SO_TIMESTAMP or SO_TIMESTAMPNS, _OLD or _NEW. */
bool sockopt_rx_timestamp(int level, int name);
/*
 * Which of those fd has on (the option's name; at most one reads back
 * on), or 0.
 */
int sockopt_rx_timestamp_on(int fd);

#endif /* ROCESHIM_SOCKOPT_H */
