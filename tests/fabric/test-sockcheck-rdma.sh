#!/bin/bash
# SPDX-License-Identifier: MIT
#
# sockcheck between the two rxe addresses with ROCESHIM_RDMA=1: the same
# socket semantics over upgraded connections.  The plain run and the
# preloaded run must print the same transcript, and most connections must
# have gone over RDMA (those to closed ports, and the IPv6 loopback ones,
# stay on TCP with their reason).
#
# Skipped, with the reason: fork_child_writes_inherited_socket, because
# by design an upgraded connection is dead in a fork child (its queue pair
# is the parent's; tests/fabric/test-fork.sh checks what happens there).
export ROCESHIM_RDMA=1
SOCKCHECK_ARGS="--server-addr $ROCESHIM_FABRIC_ADDR_B --client-addr $ROCESHIM_FABRIC_ADDR_A --skip fork_child_writes_inherited_socket" \
SOCKCHECK_MIN_RDMA=50 \
	exec /bin/bash "$top_srcdir/tests/integration/test-sockcheck.sh"
