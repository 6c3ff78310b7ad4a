#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A PyTorch Gloo job with its ranks on the two rxe addresses, plain and
# under roceshim: results identical, every Gloo pair connection in the
# stats.  World 2 only: torch starts slowly under TCG.
GLOO_TEST_WORLDS=2 GLOO_TEST_SIZES=1K,1M \
GLOO_TEST_ARGS="--rank-addrs $ROCESHIM_FABRIC_ADDR_A,$ROCESHIM_FABRIC_ADDR_B" \
GLOO_TEST_TIMEOUT=600 \
	exec /bin/bash "$top_srcdir/tests/integration/test-gloo.sh"
