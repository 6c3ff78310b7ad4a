#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Twisted's network tests as the specification of the kernel-TCP path:
# tests/peer/twisted-net runs each module with trial without and with
# roceshim (default settings; this host has no RDMA device) and compares
# every test case, under each of Twisted's reactors.  Any case that
# passes without roceshim and not with it fails this test, unless
# tests/peer/known-differences explains it.  Normal build only, as the
# CPython suite.

set -u

if [ -n "${SANITIZER_LIBASAN:-}" ]; then
	echo "SKIP: the peer suite runs in the normal build only"
	exit 77
fi
if ! /usr/bin/python3 -c 'import twisted.trial' 2>/dev/null; then
	echo "SKIP: Twisted is not installed (apt-get install python3-twisted)"
	exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/test-peer-twisted.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
"$top_srcdir/tests/peer/twisted-net" --out "$out"
