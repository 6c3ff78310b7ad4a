// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "conn.h"
#include "connector.h"
#include "cuda_mem.h"
#include "exec_handover.h"
#include "fd_room.h"
#include "fork_page.h"
#include "handshake.h"
#include "log.h"
#include "progress.h"
#include "readiness.h"
#include "rdma_stack.h"
#include "real.h"
#include "share.h"
#include "shim.h"
#include "sock.h"
#include "spin.h"
#include "stats.h"
#include "track.h"
#include "transport.h"

struct config shim_config;
bool shim_ready;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void warn_config(const char *line)
{
	log_msg(LOG_LEVEL_WARN, "%s", line);
}

/* secure_getenv: a set-uid program must not take a log path from its user. */
static const char *lookup_env(const char *name)
{
	return secure_getenv(name);
}

/* A vfork carried out as fork: the child execs or exits at once. */
static __thread bool forking_for_exec;
/* In its child, its end of the gate (vfork_as_fork()). */
static int vfork_gate = -1;

/*
 * The fork handlers call no allocator.  A program's own (jemalloc in
 * redis) may register its handlers after these: its prepare handler then
 * runs before ours and its child handler after ours, and between the
 * two its locks are held.
 */

static void FORK_CODE fork_prepare(void)
{
	/* A child never looks libc up: another thread may hold dlsym's lock. */
	real_init();
	/* First, holding nothing: it may wait for the progress thread. */
	track_fork_prepare(forking_for_exec);
	cuda_mem_fork_prepare();
	conn_fork_prepare();
	stats_fork_prepare();
	sock_pool_lock();
	readiness_fork_prepare();
	/* Last: the work before it may make descriptors. */
	fd_room_fork_prepare();
	conn_fork_lock();
}

static void FORK_CODE fork_parent(void)
{
	conn_fork_parent();
	fd_room_fork_parent();
	readiness_fork_parent();
	sock_pool_unlock();
	stats_fork_parent();
}

/*
 * fds_shared: the child shares the parent's descriptor table (a clone with
 * CLONE_FILES): it must close none of the parent's descriptors.
 */
static void FORK_CODE fork_child(bool fds_shared)
{
	/* A vfork child of the parent's is none of this child's. */
	shim_vfork_parent = 0;
	vfork_gate = -1;
	rdma_stack_fork_child();
	track_fork_child(fds_shared);
	conn_fork_child(fds_shared);
	fd_room_fork_child();
	progress_fork_child();
	connector_fork_child();
	handshake_fork_child(fds_shared);
	share_fork_child(fds_shared);
	spin_fork_child();
	readiness_fork_child();
	transport_fork_child();
	sock_pool_unlock();
	stats_fork_child();
	cuda_mem_fork_child();
	/* A log file's name may hold the pid: the child's is its own. */
	if (shim_config.log_file[0])
		log_open(shim_config.log_level, shim_config.log_file);
}

static void FORK_CODE fork_child_handler(void)
{
	fork_child(false);
}

static void at_exit(void)
{
	/* A vfork child that calls exit() must not end its parent's work. */
	if (shim_in_vfork_child())
		return;
	track_exit();
	stats_shutdown(-1);
}

static void init_once_fn(void)
{
	/* Warnings about the configuration itself always reach stderr. */
	log_open(LOG_LEVEL_WARN, NULL);
	config_load(&shim_config, lookup_env, warn_config);
	log_open(shim_config.log_level, shim_config.log_file);
	stats_configure(shim_config.enabled && shim_config.stats,
			shim_config.stats_rows);
	cuda_mem_configure(shim_config.cuda);
	if (shim_config.enabled) {
		exec_handover_load();
		share_import();
		if (share_imported())
			track_inherited_listeners();
	}
	pthread_atfork(fork_prepare, fork_parent, fork_child_handler);
	atexit(at_exit);
	log_info("enabled=%d stats=%d include=%u exclude=%u rules",
		 shim_config.enabled, shim_config.stats,
		 shim_config.include.count, shim_config.exclude.count);
}

void shim_init(void)
{
	pthread_once(&init_once, init_once_fn);
	real_init();
	__atomic_store_n(&shim_ready, true, __ATOMIC_RELEASE);
}

/*
 * The configuration is read, and reported, at start; libc's functions
 * are looked up at the first wrapped call (shim_ensure_init()), so that
 * a program that makes none (a shell's /bin/true) does not pay for it.
 */
__attribute__((constructor)) static void shim_constructor(void)
{
	pthread_once(&init_once, init_once_fn);
}

/*
 * vfork shares the parent's memory until exec: a child that closes or dups
 * sockets before exec would rewrite the parent's fd table, and one that
 * dups an upgraded connection onto its stdin would hand the exec'd program
 * a kernel socket whose bytes go over RDMA.  So a vfork is a real one only
 * while no socket in the process has RDMA state (then the child's calls
 * bypass roceshim: shim_in_vfork_child()); otherwise it is a fork, as
 * POSIX allows, and counts as one (conn_fork_prepare()): the parent runs
 * on and may close what the child is about to exec with, so the
 * connections are shared until the child's exec moves what it keeps
 * (conn_exec_fork_done()).  A
 * process with gigabytes mapped (a training job running a subprocess)
 * pays for the copy only while it has upgraded connections.
 */

int shim_vfork_gate_fd(void)
{
	return vfork_gate;
}

void shim_vfork_exec_ready(void)
{
	static const char ready = 1;

	if (vfork_gate >= 0 && real.write(vfork_gate, &ready, 1) != 1)
		vfork_gate = -1;
}

/*
 * A vfork carried out as fork keeps vfork's order: the parent waits until
 * the child has exec'd or exited (its end of a close-on-exec pipe is
 * closed), so that the child's exec has moved what it keeps to TCP before
 * the parent goes on with, or closes, the same connections.  A child that
 * said it was about to exec (shim_vfork_exec_ready()) before its end
 * closed holds none of the others: the fork stops counting.  Any other
 * end of the pipe (the child's exit, a close of its own, an exec made
 * without a wrapper) leaves it counted.
 */
static pid_t vfork_as_fork(void)
{
	int gate[2], err = errno;
	bool exec_ready = false;
	ssize_t n;
	pid_t pid;
	char byte;

	forking_for_exec = true;
	if (pipe2(gate, O_CLOEXEC)) {
		pid = real.fork();
		forking_for_exec = false;
		return pid;
	}
	pid = real.fork();
	forking_for_exec = false;
	if (pid == 0) {
		real.close(gate[0]);
		vfork_gate = gate[1];
		errno = err;
		return 0;
	}
	real.close(gate[1]);
	while (pid > 0 && (n = real.read(gate[0], &byte, 1)) != 0) {
		if (n > 0)
			exec_ready = true;
		else if (errno != EINTR)
			break;
	}
	if (exec_ready)
		conn_exec_fork_done();
	real.close(gate[0]);
	errno = pid < 0 ? errno : err;
	return pid;
}

__thread pid_t shim_vfork_parent;

bool shim_vfork_child_slow(void)
{
	if (getpid() != shim_vfork_parent)
		return true;
	/* The parent runs again: its child has exec'd or exited. */
	shim_vfork_parent = 0;
	return false;
}

#if defined(__x86_64__)
typedef pid_t (*vfork_fn)(void);

/* Called by the vfork entry below: the function it jumps to. */
__attribute__((visibility("hidden"))) vfork_fn shim_vfork_target(void);

vfork_fn shim_vfork_target(void)
{
	shim_ensure_init();
	/* A vfork child's own vfork: its parent's mark stands for both. */
	if (shim_in_vfork_child())
		return real.vfork ? real.vfork : vfork_as_fork;
	if (!real.vfork || (shim_config.enabled && !track_vfork_safe()))
		return vfork_as_fork;
	if (shim_config.enabled)
		shim_vfork_parent = getpid();
	return real.vfork;
}

/*
 * The child returns from vfork into its parent's stack, so no frame of
 * ours may be live across the call: the entry asks shim_vfork_target()
 * which vfork to run, then jumps to it, and it returns to our caller.
 */
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	endbr64\n"
	"	sub $8, %rsp\n"
	"	call shim_vfork_target\n"
	"	add $8, %rsp\n"
	"	jmp *%rax\n"
	".size vfork, .-vfork\n");
#else
SHIM_EXPORT pid_t vfork(void)
{
	shim_ensure_init();
	return vfork_as_fork();
}
#endif

/*
 * A fork made with the clone system call runs no pthread_atfork handler:
 * neither end would know that they share the connections (vsftpd starts
 * each session so, with syscall(SYS_clone, CLONE_NEWPID | ... | SIGCHLD)).
 * So syscall(SYS_fork), and a clone that copies the address space (no
 * CLONE_VM) and returns on the caller's stack, through syscall() or
 * through clone(), run the fork handlers around it as fork() does.  The
 * calls that change what an fd number names are tracked as their
 * wrappers track them (shim_fd_syscall()).  Every other system call
 * passes straight through.
 */
static bool copies_memory(uint64_t flags)
{
	return !(flags & (CLONE_VM | CLONE_THREAD));
}

/* Whether the call forks; *flags: its clone flags (0 for SYS_fork). */
static bool forks(long number, const long *arg, uint64_t *flags)
{
	const struct clone_args *ca = (const struct clone_args *)arg[0];

	*flags = 0;
#ifdef SYS_fork
	if (number == SYS_fork)
		return true;
#endif
	if (number == SYS_clone) {
		*flags = (uint64_t)arg[0];
		return copies_memory(*flags) && !arg[1];
	}
	if (number == SYS_clone3 && ca &&
	    (size_t)arg[1] >= CLONE_ARGS_SIZE_VER0) {
		*flags = ca->flags;
		return copies_memory(*flags) && !ca->stack;
	}
	return false;
}

SHIM_EXPORT long syscall(long number, ...)
{
	va_list ap;
	long arg[6], ret;
	uint64_t flags;
	int i;

	/* As libc's own: six argument registers, whatever the call uses. */
	va_start(ap, number);
	for (i = 0; i < 6; i++)
		arg[i] = va_arg(ap, long);
	va_end(ap);
	shim_ensure_init();
	if (shim_config.enabled && shim_fd_syscall(number, arg, &ret))
		return ret;
	if (shim_config.enabled) {
		shim_cred_syscall(number, arg);
		shim_uring_syscall(number);
	}
	if (!shim_config.enabled || !forks(number, arg, &flags))
		return real.syscall(number, arg[0], arg[1], arg[2], arg[3],
				    arg[4], arg[5]);
	fork_prepare();
	ret = real.syscall(number, arg[0], arg[1], arg[2], arg[3], arg[4],
			   arg[5]);
	if (ret == 0)
		fork_child(flags & CLONE_FILES);
	else
		fork_parent();
	return ret;
}

struct clone_start {
	int (*fn)(void *);
	void *arg;
	bool fds_shared;
};

/* The child's copy of the parent's clone_start: its memory is a copy. */
static int clone_child_start(void *start)
{
	struct clone_start *cs = start;

	fork_child(cs->fds_shared);
	return cs->fn(cs->arg);
}

SHIM_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	struct clone_start cs = { .fn = fn,
				  .arg = arg,
				  .fds_shared = flags & CLONE_FILES };
	pid_t *parent_tid, *child_tid;
	va_list ap;
	void *tls;
	int ret;

	va_start(ap, arg);
	parent_tid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	child_tid = va_arg(ap, pid_t *);
	va_end(ap);
	shim_ensure_init();
	if (!shim_config.enabled || !copies_memory((unsigned int)flags))
		return real.clone(fn, stack, flags, arg, parent_tid, tls,
				  child_tid);
	fork_prepare();
	ret = real.clone(clone_child_start, stack, flags, &cs, parent_tid, tls,
			 child_tid);
	fork_parent();
	return ret;
}
