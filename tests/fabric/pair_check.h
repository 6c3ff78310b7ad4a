/* SPDX-License-Identifier: MIT */
/*
 * What the fabric's C check programs share: one process holds both ends
 * of each connection (the client connects from a thread of its own), so
 * that with roceshim both are on RDMA, and each behaviour is reported as
 * "ok NAME" or "FAIL NAME: why" on stdout.
 */
#ifndef PAIR_CHECK_H
#define PAIR_CHECK_H

#include <netinet/in.h>
#include <pthread.h>

/* The listener's address, once check_listen() returned. */
extern struct sockaddr_in check_server_addr;
/* How many behaviours failed. */
extern int check_failures;

/* Listens on addr (dotted IPv4), on a port the kernel picks: 0, or -1. */
int check_listen(const char *addr);
/* The next connection to that listener (accept4(), close-on-exec). */
int check_accept(void);
/*
 * A connection to that listener: *client and *server, or the program
 * exits.  The client socket is made first, so that the numbers the
 * program's sockets get do not depend on timing.
 */
void check_pair(int *client, int *server);
/* A thread with the asynchronous signals blocked: they go elsewhere. */
void check_thread(pthread_t *t, void *(*fn)(void *), void *arg);
void check_result(const char *name, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* roceshim-stat's JSON of this process into path, if ROCESHIM_STAT is set. */
void check_save_stats(const char *path);

#endif /* PAIR_CHECK_H */
