#!/bin/bash
# SPDX-License-Identifier: MIT
#
# sockcheck between the two rxe addresses (server on rxe1's, client on
# rxe0's), plain and under roceshim with the RDMA path turned off
# (ROCESHIM_RDMA=0): transcripts identical, and every connection on TCP,
# reason "disabled".
# Time limits doubled: the guest is an emulator on a host that may be busy.
ROCESHIM_RDMA=0 \
SOCKCHECK_ARGS="--server-addr $ROCESHIM_FABRIC_ADDR_B --client-addr $ROCESHIM_FABRIC_ADDR_A --timeout-scale 2" \
SOCKCHECK_EXPECT="tcp (disabled)" \
	exec /bin/bash "$top_srcdir/tests/integration/test-sockcheck.sh"
