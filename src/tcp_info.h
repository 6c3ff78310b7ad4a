/* SPDX-License-Identifier: MIT */
/*
 * What the kernel counts of one TCP connection's stream (TCP_INFO, see
 * tcp(7)).  A file of its own: <linux/tcp.h>, which has the counters
 * glibc's <netinet/tcp.h> lacks, cannot be included beside it.
 *
 * Contract: thread safe, no state.
 */
#ifndef ROCESHIM_TCP_INFO_H
#define ROCESHIM_TCP_INFO_H

#include <stdint.h>

/*
 * The bytes the connection fd has received in order so far, read by the
 * program or not: 0, or a negative errno when the kernel cannot say.
 */
int tcp_info_bytes_received(int fd, uint64_t *bytes);

#endif /* ROCESHIM_TCP_INFO_H */
