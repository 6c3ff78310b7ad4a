// SPDX-License-Identifier: MIT
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "real.h"

struct real_libc real;

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static bool resolved; /* atomic */

/* dlsym() returns void *; the cast to a function pointer is the POSIX way. */
#define RESOLVE(name) (*(void **)&real.name = dlsym(RTLD_NEXT, #name))

static void real_resolve(void)
{
	RESOLVE(socket);
	RESOLVE(socketpair);
	RESOLVE(bind);
	RESOLVE(listen);
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(connect);
	RESOLVE(close);
	RESOLVE(close_range);
	RESOLVE(closefrom);
	RESOLVE(shutdown);
	RESOLVE(read);
	RESOLVE(write);
	RESOLVE(readv);
	RESOLVE(writev);
	RESOLVE(preadv2);
	RESOLVE(pwritev2);
	RESOLVE(recv);
	RESOLVE(send);
	RESOLVE(recvfrom);
	RESOLVE(sendto);
	RESOLVE(recvmsg);
	RESOLVE(sendmsg);
	RESOLVE(recvmmsg);
	RESOLVE(sendmmsg);
	RESOLVE(sendfile);
	RESOLVE(splice);
	RESOLVE(fdopen);
	RESOLVE(vdprintf);
	*(void **)&real.vdprintf_chk = dlsym(RTLD_NEXT, "__vdprintf_chk");
	RESOLVE(poll);
	RESOLVE(ppoll);
	RESOLVE(select);
	RESOLVE(pselect);
	RESOLVE(epoll_create);
	RESOLVE(epoll_create1);
	RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait);
	RESOLVE(epoll_pwait);
	RESOLVE(epoll_pwait2);
	RESOLVE(fcntl);
	RESOLVE(fcntl64);
	RESOLVE(ioctl);
	RESOLVE(setsockopt);
	RESOLVE(getsockopt);
	RESOLVE(getsockname);
	RESOLVE(getpeername);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fork);
	RESOLVE(vfork);
	RESOLVE(setuid);
	RESOLVE(setgid);
	RESOLVE(seteuid);
	RESOLVE(setegid);
	RESOLVE(setreuid);
	RESOLVE(setregid);
	RESOLVE(setresuid);
	RESOLVE(setresgid);
	RESOLVE(setgroups);
	RESOLVE(initgroups);
	RESOLVE(setfsuid);
	RESOLVE(setfsgid);
	RESOLVE(capset);
	RESOLVE(prctl);
	RESOLVE(syscall);
	RESOLVE(clone);
	RESOLVE(execve);
	RESOLVE(execv);
	RESOLVE(execvp);
	RESOLVE(execvpe);
	RESOLVE(fexecve);
	RESOLVE(posix_spawn);
	RESOLVE(posix_spawnp);
	RESOLVE(posix_spawn_file_actions_adddup2);
	RESOLVE(system);
	RESOLVE(popen);
	RESOLVE(daemon);
	RESOLVE(sigaction);
	*(void **)&real.exit_now = dlsym(RTLD_NEXT, "_exit");
	/* glibc before 2.28 has no fcntl64; both names mean the same call. */
	if (!real.fcntl64)
		real.fcntl64 = real.fcntl;
	if (!real.fcntl)
		real.fcntl = real.fcntl64;
	__atomic_store_n(&resolved, true, __ATOMIC_RELEASE);
}

void real_init(void)
{
	sigset_t all, old;

	if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
		return;
	/*
	 * The first wrapped call may come after the program has set signal
	 * handlers: one that made a wrapped call on this thread meanwhile
	 * would wait for this very resolution.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_once(&real_once, real_resolve);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

bool real_file_nonblocking(int fd, bool *asked)
{
	int fl = real.fcntl(fd, F_GETFL);

	*asked = fl >= 0;
	return fl >= 0 && (fl & O_NONBLOCK);
}

bool real_call_nonblocking(int fd, int msg_flags)
{
	bool asked;

	if (msg_flags & MSG_DONTWAIT)
		return true;
	return real_file_nonblocking(fd, &asked);
}

/*
 * The kernel keeps a timeout of up to LONG_MAX jiffies (sock_set_timeout()):
 * one this long outlives any process, and as milliseconds past the clock
 * it would overflow.
 */
#define TIMEOUT_SEC_NONE (INT64_C(1) << 32)

int64_t real_socket_timeout(int fd, int name, bool *asked)
{
	struct timeval tv = { 0 };
	socklen_t len = sizeof(tv);
	int err = errno;
	bool set;

	*asked = !real.getsockopt(fd, SOL_SOCKET, name, &tv, &len);
	set = *asked && (tv.tv_sec || tv.tv_usec) &&
	      tv.tv_sec < TIMEOUT_SEC_NONE;
	errno = err;
	return set ? tv.tv_sec * 1000ll + (tv.tv_usec + 999) / 1000 : -1;
}

int64_t real_socket_timeout_ms(int fd, int name)
{
	bool asked;

	return real_socket_timeout(fd, name, &asked);
}
