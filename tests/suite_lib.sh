# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# The test runner that the fabric and cluster suites share (sourced, not
# run).  The suite sets logdir and test_timeout; the counts are here.
#
# ROCESHIM_SUITE_DONE lists tests to leave out (by name, as "test-fork
# test-kill"): those that passed in a boot whose guest then panicked
# (tests/integration/test-fabric.sh).  ROCESHIM_SUITE_ONLY, when set,
# names the only tests to run (bench/fabric-conformance).

passed=0
failed=0
skipped=0
failed_checks=

# selected NAME: whether the settings above let test NAME run
selected() {
	case " ${ROCESHIM_SUITE_DONE:-} " in
	*" $1 "*)
		echo "DONE: $1 (in the boot before)"
		return 1
		;;
	esac
	case " ${ROCESHIM_SUITE_ONLY:-$1} " in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

# run_test NAME CMD...: runs CMD, its output in $logdir/NAME.log, within
# test_timeout seconds; one PASS, SKIP (exit 77) or FAIL line, a failure
# followed by its failed checks and its log's tail.
run_test() {
	local name=$1 start=$SECONDS rc log=$logdir/$1.log
	shift
	timeout -k 30 "$test_timeout" "$@" >"$log" 2>&1
	rc=$?
	[ "$rc" -eq 124 ] && echo "(killed after $test_timeout s)" >>"$log"
	case $rc in
	0)
		echo "PASS: $name ($((SECONDS - start)) s)"
		passed=$((passed + 1))
		;;
	77)
		echo "SKIP: $name: $(tail -n 1 "$log")"
		skipped=$((skipped + 1))
		;;
	*)
		echo "FAIL: $name (exit $rc, $((SECONDS - start)) s);" \
			"its failed checks and log tail:"
		grep -m 20 '^ *FAIL ' "$log" | sed 's/^/    /'
		echo "    ..."
		tail -n 40 "$log" | sed 's/^/    /'
		failed=$((failed + 1))
		failed_checks+=$(grep -m 20 '^ *FAIL ' "$log" |
			sed "s/^ */$name: /")$'\n'
		;;
	esac
	return "$rc"
}

# summary: the counts, then each failed check again (a log's last lines are
# what a CI report shows); fails if any test failed
summary() {
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ] && return 0
	printf '%s' "$failed_checks" | sed '/^$/d; s/^/failed: /'
	return 1
}
