#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The PyTorch Gloo job with ROCESHIM_RDMA=1, its ranks on the two rxe
# addresses: results identical to the plain run, and every Gloo pair
# connection upgraded (transport rdma, reason none, RDMA bytes both ways).
export ROCESHIM_RDMA=1
GLOO_TEST_WORLDS=${GLOO_TEST_WORLDS:-2} GLOO_TEST_SIZES=1K,1M \
GLOO_TEST_ARGS="--rank-addrs $ROCESHIM_FABRIC_ADDR_A,$ROCESHIM_FABRIC_ADDR_B" \
GLOO_TEST_TRANSPORT=rdma GLOO_TEST_TIMEOUT=600 \
	exec /bin/bash "$top_srcdir/tests/integration/test-gloo.sh"
