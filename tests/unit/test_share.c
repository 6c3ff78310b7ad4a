// SPDX-License-Identifier: MIT
/* Specification of the share region (src/share.c): a descendant's request
 * waits for its owner's answer, and a signal handler may interrupt it; a
 * worker that a server starts as a new program, with the listener, claims
 * the connections its owner's CM listener took, as a prefork worker does,
 * and so does an unrelated program that joins the region (a listener that
 * shares the port); and the environment variable that names the region,
 * and a region to join, are hostile input. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "progress.h"
#include "real.h"
#include "share.h"

#define PORT 4791
/* The inode of the listener a joiner lists. */
#define JOINER_LISTENER 0x5eed0001u

static const struct roceshim_stats_endpoint source = {
	.family = 2,
	.port = 40000,
	.addr = { 10, 99, 0, 2 },
};

static void *requested; /* the ctx of the last slot a descendant asked about */

static void on_request(void *ctx)
{
	__atomic_store_n(&requested, ctx, __ATOMIC_RELEASE);
}

static int start_owner(void **state)
{
	(void)state;
	real_init();
	if (!progress_start())
		return -1;
	return share_start(on_request);
}

/* The number in "NAME=N". */
static int exported_fd(const char *var)
{
	const char *eq = strchr(var, '=');

	assert_non_null(eq);
	return atoi(eq + 1);
}

/* Runs this test program as a new image with var in its environment. */
static int run_new_image(const char *var, const char *mode)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (!pid) {
		char *argv[] = { "test_share", (char *)mode, NULL };
		char *envp[] = { (char *)var, NULL };

		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * Runs this test program as a new image that joins the region of process
 * pid, its descriptor fd of inode ino.
 */
static int run_joiner(int pid, int fd, uint64_t ino)
{
	char pid_arg[16], fd_arg[16], ino_arg[24];
	int status;
	pid_t child;

	snprintf(pid_arg, sizeof(pid_arg), "%d", pid);
	snprintf(fd_arg, sizeof(fd_arg), "%d", fd);
	snprintf(ino_arg, sizeof(ino_arg), "%llu", (unsigned long long)ino);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		char *argv[] = { "test_share", "--join", pid_arg,
				 fd_arg,       ino_arg,	 NULL };
		char *envp[] = { NULL };

		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void wait_for_request(void *ctx)
{
	struct timespec tick = { 0, 1000000 };
	int i;

	for (i = 0;
	     i < 2000 && __atomic_load_n(&requested, __ATOMIC_ACQUIRE) != ctx;
	     i++)
		nanosleep(&tick, NULL);
	assert_ptr_equal(__atomic_load_n(&requested, __ATOMIC_ACQUIRE), ctx);
}

static void on_alarm(int sig)
{
	(void)sig;
}

struct answer {
	int state;
	long ms;
};

/*
 * A fork child asks about slot, a handler without SA_RESTART interrupting
 * it after interrupt_ms if that is not 0; the test reads its answer.
 */
static pid_t descendant_request(struct share_slot *slot, int interrupt_ms,
				int *answer_fd)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { 0, interrupt_ms * 1000 } };
	struct answer a;
	int fds[2];
	int64_t t0;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid) {
		close(fds[1]);
		*answer_fd = fds[0];
		return pid;
	}
	share_fork_child(false);
	if (interrupt_ms) {
		sigaction(SIGALRM, &sa, NULL);
		setitimer(ITIMER_REAL, &it, NULL);
	}
	t0 = clock_ms();
	a.state = share_request(slot, 10000);
	a.ms = clock_ms() - t0;
	_exit(write(fds[1], &a, sizeof(a)) == sizeof(a) ? 0 : 1);
}

static struct answer read_answer(pid_t pid, int fd)
{
	struct answer a = { -1, -1 };

	assert_int_equal(read(fd, &a, sizeof(a)), sizeof(a));
	close(fd);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return a;
}

static void request_waits_for_an_owner_that_answers_late(void **state)
{
	static int ctx;
	struct share_slot *slot = share_slot_new(&ctx);
	struct timespec late = { 1, 500000000 };
	struct answer a;
	int fd;
	pid_t pid;

	(void)state;
	assert_non_null(slot);
	pid = descendant_request(slot, 0, &fd);
	wait_for_request(&ctx);
	nanosleep(&late, NULL);
	share_publish(slot, SHARE_TCP);
	a = read_answer(pid, fd);
	assert_int_equal(a.state, SHARE_TCP);
	assert_true(a.ms >= 1400);
	share_slot_free(slot);
}

static void request_a_signal_interrupts_returns_before_the_end(void **state)
{
	static int ctx;
	struct share_slot *slot = share_slot_new(&ctx);
	struct answer a;
	int fd;
	pid_t pid;

	(void)state;
	assert_non_null(slot);
	pid = descendant_request(slot, 200, &fd);
	wait_for_request(&ctx);
	a = read_answer(pid, fd);
	assert_true(a.state < SHARE_TCP);
	assert_true(a.ms < 5000);
	share_slot_free(slot);
}

static void
descendant_claims_a_pending_connection_once_established(void **state)
{
	static int ctx;
	struct share_slot *slot = share_slot_new(&ctx);
	struct timespec later = { 0, 300000000 };
	bool orphan;
	int status;
	pid_t pid;

	(void)state;
	assert_non_null(slot);
	share_pending_set(slot, &source, PORT);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		share_fork_child(false);
		_exit(share_pending_claim(&source, PORT, 5000, &orphan) ==
				      SHARE_PENDING_CLAIMED
			      ? 0
			      : 1);
	}
	nanosleep(&later, NULL);
	share_pending_settle(slot, SHARE_PENDING_ESTABLISHED);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(share_pending_state(slot), SHARE_PENDING_CLAIMED);
	wait_for_request(&ctx);
	share_slot_free(slot);
}

static void new_image_claims_a_pending_connection_of_its_owner(void **state)
{
	static int ctx;
	struct share_slot *slot = share_slot_new(&ctx);
	char *var;

	(void)state;
	assert_non_null(slot);
	share_pending_set(slot, &source, PORT);
	share_pending_settle(slot, SHARE_PENDING_ESTABLISHED);
	var = share_export(false);
	assert_non_null(var);
	share_export_inherit();
	assert_int_equal(run_new_image(var, "--claim"), 0);
	share_export_close();
	free(var);
	assert_int_equal(share_pending_state(slot), SHARE_PENDING_CLAIMED);
	/* The owner hears of it, and drops its side. */
	wait_for_request(&ctx);
	share_slot_free(slot);
}

static void new_image_finds_nothing_for_another_source(void **state)
{
	static int ctx;
	struct share_slot *slot = share_slot_new(&ctx);
	struct roceshim_stats_endpoint other = source;
	char *var;

	(void)state;
	other.port++;
	share_pending_set(slot, &other, PORT);
	share_pending_settle(slot, SHARE_PENDING_ESTABLISHED);
	var = share_export(false);
	share_export_inherit();
	assert_int_equal(run_new_image(var, "--claim"), 3);
	share_export_close();
	free(var);
	assert_int_equal(share_pending_state(slot), SHARE_PENDING_ESTABLISHED);
	share_slot_free(slot);
}

static void another_program_joins_and_claims_a_pending_connection(void **state)
{
	static int ctx;
	struct share_slot *slot = share_slot_new(&ctx);
	uint64_t ino;
	int fd = share_region_fd(&ino);

	(void)state;
	assert_non_null(slot);
	assert_true(fd >= 0);
	share_pending_set(slot, &source, PORT);
	share_pending_settle(slot, SHARE_PENDING_ESTABLISHED);
	assert_int_equal(run_joiner(getpid(), fd, ino), 0);
	assert_int_equal(share_pending_state(slot), SHARE_PENDING_CLAIMED);
	/* It listed its listener. */
	assert_true(share_listener_joined(JOINER_LISTENER));
	assert_false(share_listener_joined(JOINER_LISTENER + 1));
	wait_for_request(&ctx);
	share_slot_free(slot);
}

static void join_refuses_a_descriptor_that_is_not_a_region(void **state)
{
	char path[] = "/tmp/test_share.XXXXXX";
	int fd = mkstemp(path);
	struct stat st;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(run_joiner(getpid(), fd, (uint64_t)st.st_ino), 2);
	close(fd);
}

static void join_refuses_a_region_of_another_inode(void **state)
{
	uint64_t ino;
	int fd = share_region_fd(&ino);

	(void)state;
	/* A name of another pid namespace: that pid, another process. */
	assert_int_equal(run_joiner(getpid(), fd, ino + 1), 2);
	/* A pid that no process has. */
	assert_int_equal(run_joiner(INT32_MAX, fd, ino), 2);
}

static void this_process_joins_its_own_region(void **state)
{
	uint64_t ino;
	int fd = share_region_fd(&ino);

	(void)state;
	assert_int_equal(share_join(getpid(), fd, ino, JOINER_LISTENER + 2), 1);
	assert_true(share_listener_joined(JOINER_LISTENER + 2));
}

static void exported_copy_survives_exec_only_once_inherited(void **state)
{
	char *var = share_export(false);
	int fd;

	(void)state;
	assert_non_null(var);
	assert_true(!strncmp(var, SHARE_ENV "=", sizeof(SHARE_ENV)));
	fd = exported_fd(var);
	assert_true(fd > STDERR_FILENO);
	/* Until the exec itself, another thread's exec must not take it. */
	assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	share_export_inherit();
	assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	share_export_close();
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	free(var);
}

static void import_ignores_malformed_values(void **state)
{
	static const char *const bad[] = { "",	  "x", "-1", "3x",	   " 3",
					   "0x3", "0", "2",  "99999999999" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(SHARE_ENV, bad[i], 1);
		share_import();
		assert_null(getenv(SHARE_ENV));
		assert_false(share_imported());
	}
}

static void import_leaves_a_descriptor_that_is_not_a_region_alone(void **state)
{
	char value[16];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	snprintf(value, sizeof(value), "%d", p[0]);
	setenv(SHARE_ENV, value, 1);
	share_import();
	assert_false(share_imported());
	assert_true(fcntl(p[0], F_GETFD) >= 0);
	close(p[0]);
	close(p[1]);
}

/* A memfd named as the region is, of size bytes, zero-filled. */
static int fake_region(off_t size, bool sealed)
{
	int fd = memfd_create("roceshim-share", MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	if (sealed)
		assert_int_equal(
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	return fd;
}

static void import_closes_a_region_it_cannot_use(off_t size, bool sealed)
{
	char value[16];
	int fd = fake_region(size, sealed);

	snprintf(value, sizeof(value), "%d", fd);
	setenv(SHARE_ENV, value, 1);
	share_import();
	assert_false(share_imported());
	assert_int_equal(fcntl(fd, F_GETFD), -1);
}

static void import_closes_a_region_of_another_size(void **state)
{
	(void)state;
	import_closes_a_region_it_cannot_use(4096, true);
}

/* The size of a real region, as its export shows it. */
static off_t region_size(void)
{
	char *var = share_export(false);
	struct stat st;

	assert_int_equal(fstat(exported_fd(var), &st), 0);
	share_export_close();
	free(var);
	return st.st_size;
}

static void import_closes_a_region_of_another_layout(void **state)
{
	(void)state;
	/* The right size, but not this layout's header. */
	import_closes_a_region_it_cannot_use(region_size(), true);
}

/* Its size could change under the mappings of everyone who holds it. */
static void import_closes_a_region_that_is_not_sealed(void **state)
{
	(void)state;
	import_closes_a_region_it_cannot_use(region_size(), false);
}

/* The new image of new_image_*: claims the connection from source. */
static int claim_in_new_image(void)
{
	bool orphan;

	real_init();
	share_import();
	if (!share_imported() || getenv(SHARE_ENV))
		return 2;
	if (share_pending_claim(&source, PORT, 1000, &orphan) !=
	    SHARE_PENDING_CLAIMED)
		return 3;
	/* Its owner, the test, still runs. */
	return orphan ? 4 : 0;
}

/* The new image of run_joiner(): joins, then claims from source. */
static int join_in_new_image(const char *pid, const char *fd, const char *ino)
{
	bool orphan;

	real_init();
	if (share_join(atoi(pid), atoi(fd), strtoull(ino, NULL, 10),
		       JOINER_LISTENER))
		return 2;
	if (share_pending_claim(&source, PORT, 1000, &orphan) !=
	    SHARE_PENDING_CLAIMED)
		return 3;
	return orphan ? 4 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(request_waits_for_an_owner_that_answers_late),
		cmocka_unit_test(
			request_a_signal_interrupts_returns_before_the_end),
		cmocka_unit_test(
			descendant_claims_a_pending_connection_once_established),
		cmocka_unit_test(
			new_image_claims_a_pending_connection_of_its_owner),
		cmocka_unit_test(new_image_finds_nothing_for_another_source),
		cmocka_unit_test(
			another_program_joins_and_claims_a_pending_connection),
		cmocka_unit_test(
			join_refuses_a_descriptor_that_is_not_a_region),
		cmocka_unit_test(join_refuses_a_region_of_another_inode),
		cmocka_unit_test(this_process_joins_its_own_region),
		cmocka_unit_test(
			exported_copy_survives_exec_only_once_inherited),
		cmocka_unit_test(import_ignores_malformed_values),
		cmocka_unit_test(
			import_leaves_a_descriptor_that_is_not_a_region_alone),
		cmocka_unit_test(import_closes_a_region_of_another_size),
		cmocka_unit_test(import_closes_a_region_of_another_layout),
		cmocka_unit_test(import_closes_a_region_that_is_not_sealed),
	};

	if (argc == 2 && !strcmp(argv[1], "--claim"))
		return claim_in_new_image();
	if (argc == 5 && !strcmp(argv[1], "--join"))
		return join_in_new_image(argv[2], argv[3], argv[4]);
	return cmocka_run_group_tests(tests, start_owner, NULL);
}
