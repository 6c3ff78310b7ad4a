// SPDX-License-Identifier: MIT
/* Specification of listeners that share a port (src/reuseport.c), asked
 * of the real kernel over loopback: a process holds a port only while no
 * other socket listens on it, a listener that comes later finds the
 * holder by its name (in this process or another) and is known to it
 * once it joined, the name goes with the hold and stays the parent's
 * after a fork; and the lines of /proc/net/unix that name holders are
 * hostile input. */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "progress.h"
#include "real.h"
#include "reuseport.h"
#include "share.h"

static void on_request(void *ctx)
{
	(void)ctx;
}

static int start_owner(void **state)
{
	(void)state;
	real_init();
	if (!progress_start())
		return -1;
	return share_start(on_request);
}

/* A socket with SO_REUSEPORT bound to 127.0.0.1:port (0: any free one). */
static int reuseport_socket(uint16_t port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;

	assert_true(fd >= 0);
	assert_int_equal(
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)), 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	return ntohs(sin.sin_port);
}

static uint64_t inode_of(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_ino;
}

static void a_lone_listener_holds_its_port_and_others_find_it(void **state)
{
	int fd = reuseport_socket(0), name, second;
	uint16_t port = port_of(fd);

	(void)state;
	name = reuseport_hold(port, inode_of(fd));
	assert_true(name >= 0);
	assert_int_equal(listen(fd, 8), 0);
	second = reuseport_socket(port);
	assert_int_equal(listen(second, 8), 0);
	/* Until it joins, the holder does not know the second listener. */
	assert_int_equal(reuseport_strangers(port, inode_of(fd)), 1);
	assert_int_equal(reuseport_join(port, inode_of(second)),
			 REUSEPORT_JOINED_OWN);
	assert_int_equal(reuseport_strangers(port, inode_of(fd)), 0);
	reuseport_release(name);
	close(second);
	close(fd);
}

static void another_program_finds_the_holder_by_its_name(void **state)
{
	int fd = reuseport_socket(0), name, status;
	uint16_t port = port_of(fd);
	char port_arg[8];
	pid_t child;

	(void)state;
	name = reuseport_hold(port, inode_of(fd));
	assert_true(name >= 0);
	assert_int_equal(listen(fd, 8), 0);
	snprintf(port_arg, sizeof(port_arg), "%u", (unsigned int)port);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		char *argv[] = { "test_reuseport", "--join", port_arg, NULL };
		char *envp[] = { NULL };

		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	reuseport_release(name);
	close(fd);
}

static void a_fork_child_leaves_the_parents_names_alone(void **state)
{
	int fd = reuseport_socket(0), name, status;
	uint16_t port = port_of(fd);
	pid_t child;

	(void)state;
	name = reuseport_hold(port, inode_of(fd));
	assert_true(name >= 0);
	assert_int_equal(listen(fd, 8), 0);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		reuseport_fork_child(false);
		/* Its copy is closed: the name is the parent's alone. */
		_exit(fcntl(name, F_GETFD) < 0 && errno == EBADF ? 0 : 1);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(fcntl(name, F_GETFD) >= 0);
	reuseport_release(name);
	close(fd);
}

static void a_port_another_socket_listens_on_is_not_held(void **state)
{
	int first = reuseport_socket(0), second;
	uint16_t port = port_of(first);

	(void)state;
	assert_int_equal(listen(first, 8), 0);
	second = reuseport_socket(port);
	assert_int_equal(reuseport_hold(port, inode_of(second)), -EADDRINUSE);
	/* Nothing names it: the other listener has no CM listener. */
	assert_int_equal(reuseport_join(port, inode_of(second)), 0);
	close(second);
	close(first);
}

static void the_name_goes_with_the_hold(void **state)
{
	int fd = reuseport_socket(0), name;
	uint16_t port = port_of(fd);

	(void)state;
	name = reuseport_hold(port, inode_of(fd));
	assert_true(name >= 0);
	reuseport_release(name);
	assert_int_equal(reuseport_join(port, inode_of(fd)), 0);
	close(fd);
}

static void a_holders_line_gives_where_its_region_is(void **state)
{
	const char *line = "0000000000000000: 00000002 00000000 00000000 0002 "
			   "01 123456 @roceshim-reuseport:8080:4242:1023:77\n";
	struct reuseport_holder holder;

	(void)state;
	assert_true(reuseport_parse_line(line, 8080, &holder));
	assert_int_equal(holder.pid, 4242);
	assert_int_equal(holder.fd, 1023);
	assert_int_equal(holder.ino, 77);
	/* Without its newline, as join reads it. */
	assert_true(reuseport_parse_line(
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:4242:1023:77", 8080,
		&holder));
}

static void lines_of_another_port_or_malformed_name_nothing(void **state)
{
	static const char *const lines[] = {
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8081:4242:1023:77\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:4242:1023\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:4242:1023:77x\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:-1:1023:77\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:0:1023:77\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:4242:-5:77\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:4242:1023:0\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:72080:4242:1023:77\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport:8080:99999999999:1:77\n",
		"0: 2 0 0 2 1 1 @roceshim-reuseport::4242:1023:77\n",
		"0: 2 0 0 2 1 1 /tmp/roceshim-reuseport:8080:4242:1023:77\n",
		"0: 2 0 0 2 1 1 @x-roceshim-reuseport:8080:4242:1023:77\n",
		/* Not in the path column: a path that holds the text. */
		"0: 2 0 0 2 1 1 /tmp/a @roceshim-reuseport:8080:4242:1023:77\n",
		"0: 2 0 0 2 1 @roceshim-reuseport:8080:4242:1023:77\n",
		"",
	};
	struct reuseport_holder holder;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		assert_false(reuseport_parse_line(lines[i], 8080, &holder));
}

/* The other program of another_program_finds_the_holder_by_its_name. */
static int join_in_new_image(const char *port)
{
	real_init();
	return reuseport_join((uint16_t)atoi(port), 1) == REUSEPORT_JOINED_OTHER
		       ? 0
		       : 2;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			a_lone_listener_holds_its_port_and_others_find_it),
		cmocka_unit_test(a_port_another_socket_listens_on_is_not_held),
		cmocka_unit_test(the_name_goes_with_the_hold),
		cmocka_unit_test(another_program_finds_the_holder_by_its_name),
		cmocka_unit_test(a_fork_child_leaves_the_parents_names_alone),
		cmocka_unit_test(a_holders_line_gives_where_its_region_is),
		cmocka_unit_test(
			lines_of_another_port_or_malformed_name_nothing),
	};

	if (argc == 3 && !strcmp(argv[1], "--join"))
		return join_in_new_image(argv[2]);
	return cmocka_run_group_tests(tests, start_owner, NULL);
}
