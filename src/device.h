/* SPDX-License-Identifier: MIT */
/*
 * RDMA device discovery.
 *
 * Contract: device_count() asks libibverbs once per process, on first use
 * (never at start-up: loading verbs providers costs milliseconds that a
 * program without TCP connections should not pay), and caches the answer.
 */
#ifndef ROCESHIM_DEVICE_H
#define ROCESHIM_DEVICE_H

int device_count(void);

#endif /* ROCESHIM_DEVICE_H */
