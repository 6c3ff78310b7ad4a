/* SPDX-License-Identifier: MIT */
/*
 * The libc functions roceshim wraps, resolved with dlsym(RTLD_NEXT).
 *
 * Contract: real_init() is idempotent and thread safe; after it returns,
 * every pointer in `real` is either the next definition in the lookup
 * order or NULL when libc lacks the symbol (epoll_pwait2, closefrom and
 * close_range on old glibc).  Library code must call sockets and fds only
 * through `real`, never through the exported wrappers, so that it does not
 * recurse into itself.
 */
#ifndef ROCESHIM_REAL_H
#define ROCESHIM_REAL_H

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct real_libc {
	int (*socket)(int, int, int);
	int (*socketpair)(int, int, int, int[2]);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*close)(int);
	int (*close_range)(unsigned int, unsigned int, int);
	void (*closefrom)(int);
	int (*shutdown)(int, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
			    socklen_t *);
	ssize_t (*sendto)(int, const void *, size_t, int,
			  const struct sockaddr *, socklen_t);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int,
			struct timespec *);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	FILE *(*fdopen)(int, const char *);
	int (*vdprintf)(int, const char *, va_list);
	/* __vdprintf_chk */
	int (*vdprintf_chk)(int, int, const char *, va_list);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
		     const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *,
		       const struct timespec *, const sigset_t *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
			   const sigset_t *);
	int (*epoll_pwait2)(int, struct epoll_event *, int,
			    const struct timespec *, const sigset_t *);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	pid_t (*fork)(void);
	pid_t (*vfork)(void);
	int (*setuid)(uid_t);
	int (*setgid)(gid_t);
	int (*seteuid)(uid_t);
	int (*setegid)(gid_t);
	int (*setreuid)(uid_t, uid_t);
	int (*setregid)(gid_t, gid_t);
	int (*setresuid)(uid_t, uid_t, uid_t);
	int (*setresgid)(gid_t, gid_t, gid_t);
	int (*setgroups)(size_t, const gid_t *);
	int (*initgroups)(const char *, gid_t);
	int (*setfsuid)(uid_t);
	int (*setfsgid)(gid_t);
	int (*capset)(void *, const void *);
	int (*prctl)(int, ...);
	long (*syscall)(long, ...);
	int (*clone)(int (*)(void *), void *, int, void *, ...);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execv)(const char *, char *const[]);
	int (*execvp)(const char *, char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*posix_spawn)(pid_t *, const char *,
			   const posix_spawn_file_actions_t *,
			   const posix_spawnattr_t *, char *const[],
			   char *const[]);
	int (*posix_spawnp)(pid_t *, const char *,
			    const posix_spawn_file_actions_t *,
			    const posix_spawnattr_t *, char *const[],
			    char *const[]);
	int (*posix_spawn_file_actions_adddup2)(posix_spawn_file_actions_t *,
						int, int);
	int (*system)(const char *);
	FILE *(*popen)(const char *, const char *);
	int (*daemon)(int, int);
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	/* _exit */
	__attribute__((noreturn)) void (*exit_now)(int);
};

extern struct real_libc real;

void real_init(void);

/*
 * Whether a call on fd with these MSG_ flags must not block: MSG_DONTWAIT,
 * or the file's O_NONBLOCK.  An fd whose flags cannot be read counts as
 * blocking: the call itself then fails as the kernel fails it.
 */
bool real_call_nonblocking(int fd, int msg_flags);
/* The file's O_NONBLOCK; *asked says whether the kernel answered. */
bool real_file_nonblocking(int fd, bool *asked);

/*
 * The socket's SO_RCVTIMEO or SO_SNDTIMEO (name) in milliseconds, rounded
 * up; -1 for none (or one longer than a century).  errno is left as it
 * was.  real_socket_timeout(): *asked says whether the kernel answered
 * (else -1 is a guess).
 */
int64_t real_socket_timeout_ms(int fd, int name);
int64_t real_socket_timeout(int fd, int name, bool *asked);

#endif /* ROCESHIM_REAL_H */
