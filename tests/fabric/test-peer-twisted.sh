#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Twisted's network tests as the specification of the RDMA path:
# tests/peer/twisted-net runs each module without and with roceshim
# (default settings), the tests' loopback address moved to the rxe
# address, and compares every test case under every reactor.  A case
# that passes without roceshim and not with it fails this test, unless
# tests/peer/known-differences explains it; so does a run in which fewer
# than half of the preloaded run's connections were on RDMA.  The
# modules are Twisted's TCP transport tests under every reactor and
# those of sockets adopted by a reactor.  ROCESHIM_SUITE_FULL=1
# (bench/fabric-conformance) adds the TCP internals (accept at the fd
# limit), the web client, FTP (data connections), TLS, AF_UNIX, the
# loopback, policy, SMTP and AMP tests.  The host's other modules never
# run here: their cases hang without roceshim in the guest (DNS) or add
# little over RDMA for their time (xmlrpc, distrib, the old SSL tests).
# The two ways run at once (--parallel): the guest waits on its tests'
# timeouts more than it computes.
set -u
if ! /usr/bin/python3 -c 'import twisted.trial' 2>/dev/null; then
	echo "SKIP: Twisted is not installed (apt-get install python3-twisted)"
	exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/test-peer-twisted.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
modules=twisted.internet.test.test_tcp,twisted.test.test_tcp,\
twisted.internet.test.test_socket
[ "${ROCESHIM_SUITE_FULL:-0}" = 1 ] && modules=$modules,\
twisted.test.test_tcp_internals,twisted.web.test.test_webclient,\
twisted.test.test_ftp,twisted.test.test_loopback,\
twisted.internet.test.test_tls,twisted.internet.test.test_unix,\
twisted.test.test_policies,\
twisted.mail.test.test_smtp,twisted.test.test_amp
"$top_srcdir/tests/peer/twisted-net" --addr "$ROCESHIM_FABRIC_ADDR_B" \
	--modules "$modules" --min-rdma 0.5 --parallel --out "$out"
