// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for what starts another program or leaves this one
 * behind: the exec family, posix_spawn, system, popen and daemon.  An
 * upgraded connection that the other program could use, or that this
 * process is about to stop serving, moves to its kernel TCP socket first
 * (track_exec() and friends); then libc does the rest.  glibc's own
 * execvp and the like reach the kernel without another wrapper, so each
 * entry point is wrapped.
 */
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fd_room.h"
#include "real.h"
#include "share.h"
#include "shim.h"
#include "track.h"

extern char **environ;

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	char **env;
	int ret;

	shim_ensure_init();
	env = track_exec(envp);
	ret = real.execve(path, argv, env);
	track_exec_failed(envp, env);
	return ret;
}

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
	char **env;
	int ret;

	shim_ensure_init();
	env = track_exec(environ);
	ret = env == environ ? real.execv(path, argv)
			     : real.execve(path, argv, env);
	track_exec_failed(environ, env);
	return ret;
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
	char **env;
	int ret;

	shim_ensure_init();
	env = track_exec(environ);
	ret = env == environ ? real.execvp(file, argv)
			     : real.execvpe(file, argv, env);
	track_exec_failed(environ, env);
	return ret;
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[],
			char *const envp[])
{
	char **env;
	int ret;

	shim_ensure_init();
	env = track_exec(envp);
	ret = real.execvpe(file, argv, env);
	track_exec_failed(envp, env);
	return ret;
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char **env;
	int ret;

	shim_ensure_init();
	env = track_exec(envp);
	ret = real.fexecve(fd, argv, env);
	track_exec_failed(envp, env);
	return ret;
}

/* Lists up to this long are held on the stack: see exec_list(). */
#define EXEC_LIST_ON_STACK 64

/*
 * The execl family: its variadic arguments as an argv of count entries
 * (the NULL included), in argv; for execle, the environment after the
 * NULL in *envp.
 */
static void collect(const char *arg0, va_list ap, char **argv, size_t count,
		    char ***envp)
{
	size_t n;

	argv[0] = (char *)arg0;
	for (n = 1; n < count; n++)
		argv[n] = va_arg(ap, char *);
	if (envp)
		*envp = va_arg(ap, char **);
}

/* How many entries collect() stores: the arguments and their NULL. */
static size_t list_length(const char *arg0, va_list ap)
{
	va_list walk;
	size_t n = 1;

	if (!arg0)
		return 1;
	va_copy(walk, ap);
	while (va_arg(walk, char *))
		n++;
	va_end(walk);
	return n + 1;
}

/* How an execl-family call runs its collected list. */
enum exec_kind {
	EXEC_PLAIN, /* execl: execv */
	EXEC_PATH,  /* execlp: execvp */
	EXEC_ENV,   /* execle: execve, the environment after the NULL */
};

/*
 * A vfork child may call these before it execs, so a usual list is held
 * on the stack, as glibc does: malloc there would share the parent's
 * heap.
 */
static int exec_list(const char *file, const char *arg, va_list ap,
		     enum exec_kind kind)
{
	char *on_stack[EXEC_LIST_ON_STACK];
	size_t count = list_length(arg, ap);
	char **envp = NULL;
	char **argv = on_stack;
	int ret;

	if (count > EXEC_LIST_ON_STACK) {
		argv = malloc(count * sizeof(*argv));
		if (!argv) {
			errno = ENOMEM;
			return -1;
		}
	}
	collect(arg, ap, argv, count, kind == EXEC_ENV ? &envp : NULL);
	if (kind == EXEC_ENV)
		ret = execve(file, argv, envp);
	else if (kind == EXEC_PATH)
		ret = execvp(file, argv);
	else
		ret = execv(file, argv);
	if (argv != on_stack)
		free(argv);
	return ret;
}

SHIM_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = exec_list(path, arg, ap, EXEC_PLAIN);
	va_end(ap);
	return ret;
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = exec_list(file, arg, ap, EXEC_PATH);
	va_end(ap);
	return ret;
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = exec_list(path, arg, ap, EXEC_ENV);
	va_end(ap);
	return ret;
}

SHIM_EXPORT int posix_spawn(pid_t *pid, const char *path,
			    const posix_spawn_file_actions_t *actions,
			    const posix_spawnattr_t *attr, char *const argv[],
			    char *const envp[])
{
	char **env;
	int ret;

	shim_ensure_init();
	env = track_spawn_env(envp);
	/* Its clone runs no fork handler: no child with the limit raised. */
	fd_room_fork_prepare();
	share_export_inherit();
	ret = real.posix_spawn(pid, path, actions, attr, argv, env);
	track_spawn_done(envp, env);
	fd_room_fork_parent();
	return ret;
}

SHIM_EXPORT int posix_spawnp(pid_t *pid, const char *file,
			     const posix_spawn_file_actions_t *actions,
			     const posix_spawnattr_t *attr, char *const argv[],
			     char *const envp[])
{
	char **env;
	int ret;

	shim_ensure_init();
	env = track_spawn_env(envp);
	fd_room_fork_prepare();
	share_export_inherit();
	ret = real.posix_spawnp(pid, file, actions, attr, argv, env);
	track_spawn_done(envp, env);
	fd_room_fork_parent();
	return ret;
}

SHIM_EXPORT int
posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *actions, int fd,
				 int new_fd)
{
	shim_ensure_init();
	track_spawn_dup(fd);
	return real.posix_spawn_file_actions_adddup2(actions, fd, new_fd);
}

SHIM_EXPORT int system(const char *command)
{
	shim_ensure_init();
	track_spawn();
	return real.system(command);
}

SHIM_EXPORT FILE *popen(const char *command, const char *type)
{
	shim_ensure_init();
	track_spawn();
	return real.popen(command, type);
}

SHIM_EXPORT int daemon(int nochdir, int noclose)
{
	shim_ensure_init();
	track_daemon();
	return real.daemon(nochdir, noclose);
}
