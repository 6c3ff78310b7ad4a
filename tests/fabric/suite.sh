#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The RDMA integration suite.  Runs inside one boot of the Soft-RoCE guest
# (fabric/roceshim-fabric run -- tests/fabric/suite.sh): the fabric's
# self-test first, then every tests/fabric/test-*.sh.  If the self-test
# fails, nothing else can be trusted and the suite stops there.
#
# ROCESHIM_SUITE_DONE lists tests to leave out (by name, as
# "test-fork test-kill"): those that passed in a boot whose guest then
# panicked (tests/integration/test-fabric.sh).  ROCESHIM_SUITE_ONLY, when
# set, names the only tests to run (bench/fabric-conformance).
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
passed=0
failed=0
skipped=0

# Each test's bound: a hung test fails alone and leaves the rest their time.
test_timeout=${ROCESHIM_SUITE_TEST_TIMEOUT:-1200}

# run_test NAME CMD...: runs CMD, its output in $logdir/NAME.log.
run_test() {
	local name=$1 start=$SECONDS rc
	shift
	timeout -k 30 "$test_timeout" "$@" >"$logdir/$name.log" 2>&1
	rc=$?
	[ "$rc" -eq 124 ] &&
		echo "(killed after $test_timeout s)" >>"$logdir/$name.log"
	case $rc in
	0)
		echo "PASS: $name ($((SECONDS - start)) s)"
		passed=$((passed + 1))
		;;
	77)
		echo "SKIP: $name: $(tail -n 1 "$logdir/$name.log")"
		skipped=$((skipped + 1))
		;;
	*)
		echo "FAIL: $name (exit $rc, $((SECONDS - start)) s); its failed checks and log tail:"
		grep -m 20 '^ *FAIL ' "$logdir/$name.log" | sed 's/^/    /'
		echo "    ..."
		tail -n 40 "$logdir/$name.log" | sed 's/^/    /'
		failed=$((failed + 1))
		;;
	esac
	return "$rc"
}

echo "# fabric: kernel $(uname -r), logs in $logdir"
if run_test selftest "$top_srcdir/fabric/roceshim-fabric" selftest; then
	grep '^selftest: ' "$logdir/selftest.log" | sed 's/^/# /'
	for t in "$top_srcdir"/tests/fabric/test-*.sh; do
		name=$(basename "$t" .sh)
		case " ${ROCESHIM_SUITE_DONE:-} " in
		*" $name "*)
			echo "DONE: $name (in the boot before)"
			continue
			;;
		esac
		case " ${ROCESHIM_SUITE_ONLY:-$name} " in
		*" $name "*) ;;
		*) continue ;;
		esac
		run_test "$name" /bin/bash "$t"
	done
else
	echo "# the fabric itself failed: the RDMA tests were not run"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
