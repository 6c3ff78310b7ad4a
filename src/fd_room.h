/* SPDX-License-Identifier: MIT */
/*
 * Whether the program has descriptors to spare for roceshim's own.  An
 * upgraded connection or listener holds descriptors beside the program's
 * socket, counted against the program's RLIMIT_NOFILE: near that limit
 * they would take the numbers the program's next socket(), accept() or
 * open() needs, and it would fail with EMFILE where over TCP it would
 * not.  There, connections stay on TCP (reason "fd_limit").
 *
 * Contract: fd_room() is thread safe, leaves errno alone, and judges by
 * the lowest free descriptor number, which is the one the program's next
 * descriptor takes.
 */
#ifndef ROCESHIM_FD_ROOM_H
#define ROCESHIM_FD_ROOM_H

#include <stdbool.h>

/* Descriptor numbers that must stay free below the limit. */
#define FD_ROOM_SPARE 32

bool fd_room(void);

#endif /* ROCESHIM_FD_ROOM_H */
