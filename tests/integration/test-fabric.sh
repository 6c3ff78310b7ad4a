#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Boots the Soft-RoCE guest once and runs the RDMA suite in it
# (tests/fabric/suite.sh: the fabric self-test, then every RDMA test).
# ROCESHIM_SKIP_FABRIC=1 skips it (for machines without qemu); CI never
# sets it.

set -u

if [ "${ROCESHIM_SKIP_FABRIC:-0}" = 1 ]; then
	echo "SKIP: ROCESHIM_SKIP_FABRIC=1"
	exit 77
fi
export ROCESHIM_FABRIC_CACHE=${ROCESHIM_FABRIC_CACHE:-$top_builddir/fabric/cache}
exec "$top_srcdir/fabric/roceshim-fabric" run \
	--timeout "${ROCESHIM_FABRIC_SUITE_TIMEOUT:-1800}" \
	-- /bin/bash "$top_srcdir/tests/fabric/suite.sh"
