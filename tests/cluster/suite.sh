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
passed=0
failed=0
skipped=0
# Each test's bound: a hung test fails alone and leaves the rest their time.
test_timeout=${ROCESHIM_CLUSTER_TEST_TIMEOUT:-900}
echo "# cluster: host1 $ROCESHIM_FABRIC_HOST1, host2 $ROCESHIM_FABRIC_HOST2," \
	"host3 $ROCESHIM_FABRIC_HOST3 (no RDMA); logs in $logdir"
for t in "$top_srcdir"/tests/cluster/test-*.sh; do
	name=$(basename "$t" .sh)
	start=$SECONDS
	timeout -k 30 "$test_timeout" /bin/bash "$t" >"$logdir/$name.log" 2>&1
	case $? in
	0)
		echo "PASS: $name ($((SECONDS - start)) s)"
		passed=$((passed + 1))
		;;
	77)
		echo "SKIP: $name: $(tail -n 1 "$logdir/$name.log")"
		skipped=$((skipped + 1))
		;;
	*)
		echo "FAIL: $name ($((SECONDS - start)) s); its failed checks and log tail:"
		grep -m 20 '^ *FAIL ' "$logdir/$name.log" | sed 's/^/    /'
		echo "    ..."
		tail -n 40 "$logdir/$name.log" | sed 's/^/    /'
		failed=$((failed + 1))
		;;
	esac
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
