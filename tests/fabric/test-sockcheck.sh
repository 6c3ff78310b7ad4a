#!/bin/bash
# SPDX-License-Identifier: MIT
#
# sockcheck between the two rxe addresses (server on rxe1's, client on
# rxe0's), plain and under roceshim, transcripts identical.  On this fabric
# roceshim must see the RDMA devices: its decisions say why each
# connection stayed on TCP, and "no_device" would mean it did not.
SOCKCHECK_ARGS="--server-addr $ROCESHIM_FABRIC_ADDR_B --client-addr $ROCESHIM_FABRIC_ADDR_A" \
SOCKCHECK_EXPECT="tcp (unsupported)" \
	exec /bin/bash "$top_srcdir/tests/integration/test-sockcheck.sh"
