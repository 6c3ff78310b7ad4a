#!/bin/bash
# SPDX-License-Identifier: MIT
# The fabric tool's own behaviour: exit statuses, output and files coming
# back, --user, and no qemu left behind on SIGTERM (fabric/test-fabric.sh).
set -u
if [ "${ROCESHIM_SKIP_FABRIC:-0}" = 1 ]; then
	echo "SKIP: ROCESHIM_SKIP_FABRIC=1"
	exit 77
fi
export ROCESHIM_FABRIC_CACHE=${ROCESHIM_FABRIC_CACHE:-$top_builddir/fabric/cache}
exec "$top_srcdir/fabric/test-fabric.sh"
