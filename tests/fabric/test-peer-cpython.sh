#!/bin/bash
# SPDX-License-Identifier: MIT
#
# CPython's network tests as the specification of the RDMA path:
# tests/peer/cpython-net runs each module without and with roceshim
# (default settings), the tests' loopback address moved to the rxe
# address so that their connections upgrade, and compares every test
# case.  A case that passes without roceshim and not with it fails this
# test, unless tests/peer/known-differences explains it; so does a run in
# which fewer than half of the preloaded run's connections were on RDMA.
# The modules are those that open the most TCP connections through the
# most APIs: blocking and non-blocking sockets, asyncio's loops, streams,
# servers and sendfile, socketserver's threading and forking servers.
# The rest of test_asyncio (base_events, mostly with mock sockets; tasks,
# locks, subprocesses: no TCP) and test_selectors (socketpair():
# AF_UNIX) run with ROCESHIM_SUITE_FULL=1 (bench/fabric-conformance);
# the TCP path runs the whole list (tests/integration/test-peer-cpython.sh).
# The two ways run at once (--parallel): the guest waits on its tests'
# timeouts more than it computes.
set -u
if [ ! -d /usr/lib/python3.11/test/libregrtest ]; then
	echo "SKIP: CPython's test suite is not installed" \
		"(apt-get install libpython3.11-testsuite)"
	exit 77
fi
modules=test_socket,test_asyncio.test_events,test_asyncio.test_streams,\
test_asyncio.test_sock_lowlevel,test_asyncio.test_sendfile,\
test_asyncio.test_server,test_socketserver
[ "${ROCESHIM_SUITE_FULL:-0}" = 1 ] &&
	modules=test_socket,test_asyncio,test_socketserver,test_selectors
out=$(mktemp -d "${TMPDIR:-/tmp}/test-peer-cpython.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
"$top_srcdir/tests/peer/cpython-net" --addr "$ROCESHIM_FABRIC_ADDR_B" \
	--modules "$modules" \
	--min-rdma 0.5 --parallel --out "$out"
