#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The PyTorch Gloo job with ROCESHIM_RDMA=1, its ranks on the two rxe
# addresses: results identical to the plain run, and every Gloo pair
# connection upgraded (transport rdma, reason none, RDMA bytes both ways).
#
# World 2 only for now: world 4 over RDMA passes some runs and aborts in
# others (a Gloo pair closed mid-run, "state_ <= CONNECTED. 5 vs 4"); it
# is an open bug, not yet a test that can be trusted to pass.
set -u
export ROCESHIM_RDMA=1 GLOO_TEST_SIZES=1K,1M GLOO_TEST_TRANSPORT=rdma \
	GLOO_TEST_TIMEOUT=600 GLOO_TEST_WORLDS=2
GLOO_TEST_ARGS="--rank-addrs $ROCESHIM_FABRIC_ADDR_A,$ROCESHIM_FABRIC_ADDR_B" \
	exec /bin/bash "$top_srcdir/tests/integration/test-gloo.sh"
