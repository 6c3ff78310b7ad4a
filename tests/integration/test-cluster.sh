#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Boots a cluster of three fabric guests on one emulated wire, host3
# without RDMA, and runs the cluster suite on host1
# (tests/cluster/suite.sh: connections across the wire, and a two-node
# torchrun Gloo job over TCP and over RDMA).  ROCESHIM_SKIP_FABRIC=1
# skips it (for machines without qemu); CI never sets it.
set -u

if [ "${ROCESHIM_SKIP_FABRIC:-0}" = 1 ]; then
	echo "SKIP: ROCESHIM_SKIP_FABRIC=1"
	exit 77
fi
export ROCESHIM_FABRIC_CACHE=${ROCESHIM_FABRIC_CACHE:-$top_builddir/fabric/cache}
# One fabric at a time (make -j check): its timings assume the cores.
exec 9>"$top_builddir/fabric-run.lock"
flock 9
exec "$top_srcdir/fabric/roceshim-fabric" run --hosts 3 --plain host3 \
	--timeout "${ROCESHIM_CLUSTER_TIMEOUT:-2400}" \
	-- /bin/bash "$top_srcdir/tests/cluster/suite.sh"
