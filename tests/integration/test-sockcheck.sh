#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The socket-semantics suite (sockcheck) run plain and under roceshim-run:
# both runs must pass, their transcripts (test verdicts and data digests)
# must be identical byte for byte, and the preloaded run's debug log must
# show that roceshim saw the connections (so the comparison is not
# between two plain runs).
#
# Environment (from the test harness): ROCESHIM_RUN, top_builddir.
# Optional: SOCKCHECK_ARGS (e.g. "--server-addr 10.99.0.2 --client-addr
# 10.99.0.1" on the RDMA fabric), SOCKCHECK_EXPECT (what every logged
# decision must say after "on", e.g. "tcp (no_device)"), SOCKCHECK_MIN_RDMA
# (at least this many connections must have gone over RDMA).

set -u

sockcheck=${SOCKCHECK:-$top_builddir/tests/integration/sockcheck}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-sockcheck.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*"
	exit 1
}

[ -x "$sockcheck" ] || fail "$sockcheck not built"
# shellcheck disable=SC2086 # SOCKCHECK_ARGS is a list of options
set -- ${SOCKCHECK_ARGS:-}

echo "# plain run: $sockcheck $*"
"$sockcheck" "$@" >"$tmp/plain.out" 2>"$tmp/plain.err"
plain_rc=$?
tail -n 1 "$tmp/plain.out"

echo "# preloaded run: $ROCESHIM_RUN $sockcheck $*"
ROCESHIM_LOG_LEVEL=debug ROCESHIM_LOG_FILE="$tmp/roceshim.%p.log" \
	"$ROCESHIM_RUN" "$sockcheck" "$@" >"$tmp/shim.out" 2>"$tmp/shim.err"
shim_rc=$?
tail -n 1 "$tmp/shim.out"

status=0
if [ "$plain_rc" -ne 0 ]; then
	echo "FAIL: plain run exited $plain_rc"
	grep -E '^FAIL' "$tmp/plain.out"
	status=1
fi
if [ "$shim_rc" -ne 0 ]; then
	echo "FAIL: preloaded run exited $shim_rc"
	grep -E '^FAIL' "$tmp/shim.out"
	cat "$tmp/shim.err"
	status=1
fi
if ! diff -u "$tmp/plain.out" "$tmp/shim.out" >"$tmp/diff"; then
	echo "FAIL: transcripts differ:"
	cat "$tmp/diff"
	status=1
else
	echo "ok transcripts identical ($(wc -l <"$tmp/plain.out") lines)"
fi
if [ -s "$tmp/shim.err" ] && grep -q 'roceshim' "$tmp/shim.err"; then
	echo "FAIL: roceshim wrote to the program's stderr:"
	grep roceshim "$tmp/shim.err"
	status=1
fi

# Evidence that the preload was active: connections decided by roceshim.
connects=$(cat "$tmp"/roceshim.*.log 2>/dev/null | grep -c ': connect to ')
accepts=$(cat "$tmp"/roceshim.*.log 2>/dev/null | grep -c ': accepted from ')
echo "# roceshim saw $connects connects and $accepts accepts"
if [ "$connects" -lt 50 ] || [ "$accepts" -lt 50 ]; then
	echo "FAIL: too few connections tracked under the preload"
	status=1
fi
if [ -n "${SOCKCHECK_EXPECT:-}" ] &&
   grep -E ': (connect to|accepted from) ' "$tmp"/roceshim.*.log |
   grep -vF " on $SOCKCHECK_EXPECT" | head -n 5 | grep .; then
	echo "FAIL: the decisions above are not \"$SOCKCHECK_EXPECT\""
	status=1
fi
echo "# decisions:"
grep -ohE ' on (rdma|tcp \([a-z_]+\))' "$tmp"/roceshim.*.log | sort | uniq -c
if [ -n "${SOCKCHECK_MIN_RDMA:-}" ]; then
	rdma=$(cat "$tmp"/roceshim.*.log | grep -c ' on rdma$')
	if [ "$rdma" -lt "$SOCKCHECK_MIN_RDMA" ]; then
		echo "FAIL: only $rdma connections over RDMA (want >= $SOCKCHECK_MIN_RDMA)"
		status=1
	fi
fi
[ "$status" -eq 0 ] && echo "PASS: sockcheck identical with and without roceshim"
exit "$status"
