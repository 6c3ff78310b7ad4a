#!/bin/bash
# SPDX-License-Identifier: MIT
#
# CPython's network test suite as the specification of the kernel-TCP
# path: tests/peer/cpython-net runs each module without and with roceshim
# (default settings; this host has no RDMA device) and compares every
# test case.  Any case that passes without roceshim and not with it fails
# this test, unless tests/peer/known-differences explains it.
#
# It takes about ten minutes here, so it runs in the normal build only:
# under the sanitizer build Python would run with the ASan runtime
# preloaded for every module twice.

set -u

if [ -n "${SANITIZER_LIBASAN:-}" ]; then
	echo "SKIP: the peer suite runs in the normal build only"
	exit 77
fi
if [ ! -d /usr/lib/python3.11/test/libregrtest ]; then
	echo "SKIP: CPython's test suite is not installed" \
		"(apt-get install libpython3.11-testsuite)"
	exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/test-peer-cpython.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
"$top_srcdir/tests/peer/cpython-net" --out "$out"
