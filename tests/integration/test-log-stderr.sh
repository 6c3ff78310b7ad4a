#!/bin/bash
# SPDX-License-Identifier: MIT
#
# roceshim's log lines go to stderr unless ROCESHIM_LOG_FILE says
# otherwise, and stderr may be a socket (tests/integration/log_stderr.py):
# a TCP connection or listener there (inetd, socket activation) gets
# none, since a line would reach the peer as data or SIGPIPE would end
# the program (an inetd "wait" service died so, before its first accept);
# a Unix stream socket (journald's) gets them.

set -u
PYTHON=${PYTHON:-/usr/bin/python3}
probe="$top_srcdir/tests/integration/log_stderr.py"

# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

run() {
	ROCESHIM_RDMA=0 ROCESHIM_LOG_LEVEL=debug timeout 60 \
		"$ROCESHIM_RUN" "$PYTHON" "$probe" "$1" 2>/dev/null
}
check_eq tcp_connection_on_stderr_gets_only_the_programs_bytes "peer ok" \
	"$(run connection)"
check_eq tcp_listener_on_stderr_does_not_end_the_program alive \
	"$(run listener)"
check_eq unix_socket_on_stderr_gets_the_log "log ok" "$(run unix)"

# A process whose /dev/shm cannot take its stats segment (a chroot or a
# sandbox: dovecot's login processes, whose stderr is its log) runs
# without stats, and says so only at info level.
no_shm() { # LEVEL: what the process writes to stderr, with its exit code
	local empty

	empty=$(mktemp -d) || return
	# shellcheck disable=SC2016 # expanded by the inner shell
	ROCESHIM_RDMA=0 ROCESHIM_LOG_LEVEL=$1 timeout 60 unshare -m /bin/sh -c \
		'mount --bind "$1" /dev/shm && mount -o remount,bind,ro /dev/shm &&
		shift && exec "$@" 2>&1 >/dev/null' sh "$empty" \
		"$ROCESHIM_RUN" "$PYTHON" -c 'import socket
s = socket.create_server(("127.0.0.1", 0))
socket.create_connection(s.getsockname()).close()'
	echo "rc $?"
	rmdir "$empty"
}
if unshare -m true 2>/dev/null; then
	out=$(no_shm warn)
	check_eq no_stats_segment_says_nothing_at_warn "0 rc 0" \
		"$(grep -c roceshim <<<"$out") $(tail -n1 <<<"$out")"
	check_eq no_stats_segment_says_so_at_info 1 \
		"$(no_shm info | grep -c 'stats are off')"
else
	echo "SKIP no_stats_segment_*: unshare -m needs root here"
fi
finish
