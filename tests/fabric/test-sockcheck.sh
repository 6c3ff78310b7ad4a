#!/bin/bash
# SPDX-License-Identifier: MIT
#
# sockcheck between the two rxe addresses (server on rxe1's, client on
# rxe0's), plain and under roceshim with the RDMA path off (the default):
# transcripts identical, and every connection on TCP, reason "disabled".
SOCKCHECK_ARGS="--server-addr $ROCESHIM_FABRIC_ADDR_B --client-addr $ROCESHIM_FABRIC_ADDR_A" \
SOCKCHECK_EXPECT="tcp (disabled)" \
	exec /bin/bash "$top_srcdir/tests/integration/test-sockcheck.sh"
