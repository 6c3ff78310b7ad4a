#!/bin/bash
# SPDX-License-Identifier: MIT
#
# sockcheck between the two rxe addresses with default settings: the same
# socket semantics over upgraded connections.  The plain run and the
# preloaded run must print the same transcript, and most connections must
# have gone over RDMA (those to closed ports, and the IPv6 loopback ones,
# stay on TCP with their reason).
# Time limits doubled: the guest is an emulator on a host that may be busy.
SOCKCHECK_ARGS="--server-addr $ROCESHIM_FABRIC_ADDR_B --client-addr $ROCESHIM_FABRIC_ADDR_A --timeout-scale 2" \
SOCKCHECK_MIN_RDMA=50 \
	exec /bin/bash "$top_srcdir/tests/integration/test-sockcheck.sh"
