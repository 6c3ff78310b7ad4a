#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A PyTorch Gloo job with its ranks on the two rxe addresses, plain and
# under roceshim with the RDMA path turned off (ROCESHIM_RDMA=0): results
# identical, every Gloo pair connection in the stats, on TCP.  World 2
# only: torch starts slowly under TCG.
ROCESHIM_RDMA=0 GLOO_TEST_WORLDS=2 GLOO_TEST_SIZES=1K,1M \
GLOO_TEST_ARGS="--rank-addrs $ROCESHIM_FABRIC_ADDR_A,$ROCESHIM_FABRIC_ADDR_B" \
GLOO_TEST_TIMEOUT=600 \
	exec /bin/bash "$top_srcdir/tests/integration/test-gloo.sh"
