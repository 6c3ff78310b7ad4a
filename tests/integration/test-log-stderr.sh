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
finish
