#!/bin/bash
# SPDX-License-Identifier: MIT
#
# test-sockcheck-rdma.sh over native IPv6: sockcheck between the fabric's
# two IPv6 addresses (RoCEv2 with IPv6 GIDs) with default settings.  The
# plain and preloaded transcripts must be identical, and most connections
# must have gone over RDMA.
#
# Clients that bind bind to the server's own address: in this one-namespace
# fabric rdma_cm cannot cross the link on IPv6 (rping -I fd99::1 -a fd99::2
# fails too), so a client bound to fd99::1 would time out and use TCP.
# Bound to fd99::2, its queue pair loops back on rxe1.
# Time limits doubled: the guest is an emulator on a host that may be busy.
SOCKCHECK_ARGS="--server-addr $ROCESHIM_FABRIC_ADDR6_B --client-addr $ROCESHIM_FABRIC_ADDR6_B --timeout-scale 2" \
SOCKCHECK_MIN_RDMA=50 \
	exec /bin/bash "$top_srcdir/tests/integration/test-sockcheck.sh"
