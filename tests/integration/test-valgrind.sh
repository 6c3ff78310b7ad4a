#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The socket-semantics suite under the preload, inside valgrind's memcheck:
# any invalid read or write, use of uninitialised memory or bad free in
# roceshim (or in the program because of roceshim) fails the test.

set -u

command -v valgrind >/dev/null || {
	echo "SKIP: valgrind not installed"
	exit 77
}
sockcheck=$top_builddir/tests/integration/sockcheck
log=$(mktemp "${TMPDIR:-/tmp}/test-valgrind.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT

# sockcheck skips epoll_pwait2 here: valgrind 3.19 lacks the system call.
# The cases that pass NULL buffers on purpose (the kernel's EFAULT, and
# MSG_TRUNC, which copies nothing) or ones past the address space are left
# out: memcheck flags the pointer itself.  So is the SIOCOUTQ case:
# valgrind 3.19 does not know SIOCOUTQNSD, and warns that it may then
# report its result as uninitialised.
"$ROCESHIM_RUN" valgrind --quiet --error-exitcode=99 --trace-children=no \
	--log-file="$log" "$sockcheck" --timeout-scale 4 \
	--skip trunc_takes_bytes_without_a_buffer,buffers_are_checked_as_the_kernel_does,buffers_past_the_address_space_fail_with_efault,siocoutq_is_zero_only_once_the_peer_holds_every_byte \
	>/dev/null 2>&1
rc=$?
if [ "$rc" -eq 99 ] || grep -q "^==" "$log"; then
	echo "FAIL: memcheck reported errors:"
	cat "$log"
	exit 1
fi
if [ "$rc" -ne 0 ]; then
	echo "FAIL: sockcheck under valgrind exited $rc"
	exit 1
fi
echo "PASS: sockcheck under roceshim and memcheck, no errors"
