#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The RDMA integration suite.  Runs inside one boot of the Soft-RoCE guest
# (fabric/roceshim-fabric run -- tests/fabric/suite.sh): the fabric's
# self-test first, then every tests/fabric/test-*.sh.  If the self-test
# fails, nothing else can be trusted and the suite stops there.
#
# ROCESHIM_SUITE_DONE and ROCESHIM_SUITE_ONLY select tests
# (tests/suite_lib.sh).
#
# Environment: what the host's test harness sets (ROCESHIM_RUN, ROCESHIM_LIB,
# ROCESHIM_STAT, PYTHON, top_srcdir, top_builddir) reaches the guest.

set -u

if [ "${ROCESHIM_FABRIC:-}" != 1 ]; then
	echo "suite.sh runs inside the fabric:" \
		"fabric/roceshim-fabric run -- $0" >&2
	exit 2
fi

logdir=${ROCESHIM_SUITE_LOGS:-$PWD/fabric-logs}
mkdir -p "$logdir"
# Each test's bound: a hung test fails alone and leaves the rest their time.
test_timeout=${ROCESHIM_SUITE_TEST_TIMEOUT:-1200}

# shellcheck source=../suite_lib.sh
. "$top_srcdir/tests/suite_lib.sh"

echo "# fabric: kernel $(uname -r), logs in $logdir"
if run_test selftest "$top_srcdir/fabric/roceshim-fabric" selftest; then
	grep '^selftest: ' "$logdir/selftest.log" | sed 's/^/# /'
	for t in "$top_srcdir"/tests/fabric/test-*.sh; do
		name=$(basename "$t" .sh)
		selected "$name" && run_test "$name" /bin/bash "$t"
	done
else
	echo "# the fabric itself failed: the RDMA tests were not run"
fi
summary
