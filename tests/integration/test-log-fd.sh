#!/bin/bash
# SPDX-License-Identifier: MIT
#
# roceshim's log file (ROCESHIM_LOG_FILE) is not the program's
# descriptor: a program that closes every number from 3 (ssh, daemons),
# closes the log's own number, or dup2()s a file onto it keeps its files
# and sockets to itself, and the log goes on receiving its lines
# (tests/integration/log_fd.py).

set -u
PYTHON=${PYTHON:-/usr/bin/python3}
probe="$top_srcdir/tests/integration/log_fd.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-log-fd.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

for step in closerange closefrom close_range_syscall close dup2; do
	ROCESHIM_RDMA=0 ROCESHIM_LOG_LEVEL=debug \
		ROCESHIM_LOG_FILE="$tmp/log.%p" "$ROCESHIM_RUN" \
		"$PYTHON" "$probe" "$tmp" "$step" >"$tmp/$step.out" 2>&1
	sed "s/^/    $step: /" "$tmp/$step.out"
	check "after_${step}_the_programs_file_gets_only_its_bytes" \
		grep -qx "file ok" "$tmp/$step.out"
	check "after_${step}_the_programs_socket_gets_only_its_bytes" \
		grep -qx "socket ok" "$tmp/$step.out"
	check "after_${step}_the_log_still_gets_its_lines" \
		grep -qx "log ok" "$tmp/$step.out"
done
check close_of_the_log_number_fails_as_for_an_unopened_one \
	grep -qx "close Bad file descriptor" "$tmp/close.out"
finish
