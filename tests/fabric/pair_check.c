// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pair_check.h"

struct sockaddr_in check_server_addr = { .sin_family = AF_INET };
int check_failures;
static int listener = -1;

int check_listen(const char *addr)
{
	socklen_t len = sizeof(check_server_addr);

	if (inet_pton(AF_INET, addr, &check_server_addr.sin_addr) != 1)
		return -1;
	listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listener < 0 ||
	    bind(listener, (struct sockaddr *)&check_server_addr,
		 sizeof(check_server_addr)) ||
	    listen(listener, 8) ||
	    getsockname(listener, (struct sockaddr *)&check_server_addr, &len))
		return -1;
	return 0;
}

void check_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(t, NULL, fn, arg)) {
		printf("FAIL thread: %s\n", strerror(errno));
		exit(1);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int check_accept(void)
{
	return accept4(listener, NULL, NULL, SOCK_CLOEXEC);
}

static void *connect_one(void *arg)
{
	int *fd = arg;

	if (connect(*fd, (struct sockaddr *)&check_server_addr,
		    sizeof(check_server_addr))) {
		close(*fd);
		*fd = -1;
	}
	return NULL;
}

void check_pair(int *client, int *server)
{
	pthread_t t;

	*client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*client >= 0)
		check_thread(&t, connect_one, client);
	*server = *client < 0 ? -1 : check_accept();
	if (*client >= 0)
		pthread_join(t, NULL);
	if (*client < 0 || *server < 0) {
		printf("FAIL pair: %s\n", strerror(errno));
		exit(1);
	}
}

void check_result(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("ok %s\n", name);
	} else {
		check_failures++;
		printf("FAIL %s: ", name);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
	}
	fflush(stdout);
}

void check_save_stats(const char *path)
{
	const char *stat = getenv("ROCESHIM_STAT");
	char cmd[512];

	if (!stat)
		return;
	snprintf(cmd, sizeof(cmd), "'%s' --json %d > '%s'", stat, (int)getpid(),
		 path);
	if (system(cmd))
		printf("FAIL stats: roceshim-stat failed\n");
}
