#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The PyTorch Gloo job with default settings at world 2, its ranks on the
# two rxe addresses: results identical to the plain run, and every Gloo
# pair connection upgraded (transport rdma, reason none, RDMA bytes both
# ways).  Then world 2 again with the 1 MiB ring that docs/performance.md
# suggests for Gloo, and 4 MiB tensors, so that each message takes
# several turns of that ring.  World 4 runs across hosts in the cluster
# suite (tests/cluster/test-gloo.sh); ROCESHIM_SUITE_FULL=1
# (bench/fabric-conformance) adds it here too, with default settings, and
# world 2 with the RDMA path off (every pair connection in the stats, on
# TCP).
set -u
export GLOO_TEST_SIZES=1K,1M GLOO_TEST_TRANSPORT=rdma \
	GLOO_TEST_TIMEOUT=600
A=$ROCESHIM_FABRIC_ADDR_A
B=$ROCESHIM_FABRIC_ADDR_B
GLOO_TEST_WORLDS=2 GLOO_TEST_ARGS="--rank-addrs $A,$B" \
	/bin/bash "$top_srcdir/tests/integration/test-gloo.sh" || exit
if [ "${ROCESHIM_SUITE_FULL:-0}" = 1 ]; then
	ROCESHIM_RDMA=0 GLOO_TEST_TRANSPORT=tcp GLOO_TEST_WORLDS=2 \
		GLOO_TEST_ARGS="--rank-addrs $A,$B" \
		/bin/bash "$top_srcdir/tests/integration/test-gloo.sh" || exit
	GLOO_TEST_WORLDS=4 GLOO_TEST_ARGS="--rank-addrs $A,$B,$A,$B" \
		/bin/bash "$top_srcdir/tests/integration/test-gloo.sh" || exit
fi
ROCESHIM_RING_KB=1024 GLOO_TEST_SIZES=1K,4M GLOO_TEST_WORLDS=2 \
	GLOO_TEST_ARGS="--rank-addrs $A,$B" \
	exec /bin/bash "$top_srcdir/tests/integration/test-gloo.sh"
