#!/bin/bash
# SPDX-License-Identifier: MIT
#
# test-sockcheck-rdma.sh with every socket AF_INET6 and every address the
# v4-mapped form of the fabric's IPv4 ones, as dual-stack servers (Java's
# among them) bind and connect: the plain and preloaded transcripts must be
# identical, and most connections must have gone over RDMA.
# Time limits doubled: the guest is an emulator on a host that may be busy.
SOCKCHECK_ARGS="--server-addr ::ffff:$ROCESHIM_FABRIC_ADDR_A --client-addr ::ffff:$ROCESHIM_FABRIC_ADDR_B --timeout-scale 2" \
SOCKCHECK_MIN_RDMA=50 \
	exec /bin/bash "$top_srcdir/tests/integration/test-sockcheck.sh"
