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
# The modules are those that open the most connections through the most
# APIs (blocking and non-blocking sockets, selectors, asyncio's loops,
# socketserver's threading and forking servers); the TCP path runs the
# whole list (tests/integration/test-peer-cpython.sh).
set -u
if [ ! -d /usr/lib/python3.11/test/libregrtest ]; then
	echo "SKIP: CPython's test suite is not installed" \
		"(apt-get install libpython3.11-testsuite)"
	exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/test-peer-cpython.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
"$top_srcdir/tests/peer/cpython-net" --addr "$ROCESHIM_FABRIC_ADDR_B" \
	--modules test_socket,test_asyncio,test_socketserver,test_selectors \
	--min-rdma 0.5 --out "$out"
