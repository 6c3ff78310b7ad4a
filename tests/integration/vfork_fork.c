// SPDX-License-Identifier: MIT
/*
 * A vfork that execs, then at once a fork: the fork child opens a
 * listener and reports whether roceshim tracked it (its own stats segment
 * appears).  Nothing between the two calls goes through roceshim, which
 * is the case a vfork mark left behind in the parent's thread would
 * break.  Prints "forked ok" or "forked untracked"; exits 0 either way,
 * and 1 if something else failed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Kept apart so that nothing in main's frame lives across vfork(). */
static pid_t __attribute__((noinline)) vfork_true(void)
{
	pid_t pid = vfork();

	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int child_tracks_a_listener(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char path[64];
	int l;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(l, 1))
		return 2;
	snprintf(path, sizeof(path), "/dev/shm/roceshim-%d", (int)getpid());
	return access(path, F_OK) == 0 ? 0 : 1;
}

int main(void)
{
	int status;
	pid_t pid;

	pid = vfork_true();
	if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
		return 1;
	pid = fork();
	if (pid == 0)
		_exit(child_tracks_a_listener());
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) > 1)
		return 1;
	printf("forked %s\n", WEXITSTATUS(status) ? "untracked" : "ok");
	return 0;
}
