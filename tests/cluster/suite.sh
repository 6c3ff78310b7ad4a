#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The cluster suite: runs on host1 of a fabric cluster
# (fabric/roceshim-fabric run --hosts 3 --plain host3 -- tests/cluster/suite.sh):
# host1 and host2 have an rxe device on the wire, host3 has none.  Runs
# every tests/cluster/test-*.sh, its output in $logdir/NAME.log; one
# that exits 77 is skipped.
set -u

if [ "${ROCESHIM_FABRIC_HOSTS:-1}" -lt 3 ]; then
	echo "suite.sh runs on host1 of a 3-host fabric:" \
		"fabric/roceshim-fabric run --hosts 3 --plain host3 -- $0" >&2
	exit 2
fi

logdir=${ROCESHIM_SUITE_LOGS:-$PWD/cluster-logs}
mkdir -p "$logdir"
# Each test's bound: a hung test fails alone and leaves the rest their time.
test_timeout=${ROCESHIM_CLUSTER_TEST_TIMEOUT:-900}
# shellcheck source=../suite_lib.sh
. "$top_srcdir/tests/suite_lib.sh"
echo "# cluster: host1 $ROCESHIM_FABRIC_HOST1, host2 $ROCESHIM_FABRIC_HOST2," \
	"host3 $ROCESHIM_FABRIC_HOST3 (no RDMA); logs in $logdir"
for t in "$top_srcdir"/tests/cluster/test-*.sh; do
	name=$(basename "$t" .sh)
	selected "$name" && run_test "$name" /bin/bash "$t"
done
summary
