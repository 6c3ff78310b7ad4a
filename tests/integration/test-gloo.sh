#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A PyTorch job on the Gloo backend, world 2 and world 4, ops all_reduce,
# broadcast, all_gather and send/recv at 1 KiB, 1 MiB and 4 MiB: once plain,
# once under roceshim-run with --check-stats.  Each rank verifies its results
# against a locally computed expectation; the digests of both runs must be
# identical.
#
# Environment (set by the test harness): ROCESHIM_RUN, ROCESHIM_STAT,
# ROCESHIM_LIB, PYTHON, top_srcdir, top_builddir.  Optional: GLOO_TEST_WORLDS
# (default "2 4"), GLOO_TEST_SIZES (default 1K,1M,4M), GLOO_TEST_OPS (all),
# GLOO_TEST_TIMEOUT (per job, default 300 s), GLOO_TEST_ARGS (more launch
# options for both runs, e.g. --rank-addrs on the fabric),
# GLOO_TEST_TRANSPORT (what the stats must show, default tcp).

# cleanup is called from the trap.
# shellcheck disable=SC2317

set -u

here=$(cd "$(dirname "$0")" && pwd)
srcdir=${top_srcdir:+$top_srcdir/tests/integration}
srcdir=${srcdir:-$here}
builddir=${top_builddir:-}
PYTHON=${PYTHON:-/usr/bin/python3}
job="$srcdir/gloo_job.py"
worlds=${GLOO_TEST_WORLDS:-2 4}
sizes=${GLOO_TEST_SIZES:-1K,1M,4M}
ops=${GLOO_TEST_OPS:-all_reduce,broadcast,all_gather,send_recv}
timeout=${GLOO_TEST_TIMEOUT:-300}
transport=${GLOO_TEST_TRANSPORT:-tcp}
# shellcheck disable=SC2206 # a list of options
extra=(${GLOO_TEST_ARGS:-})

skip() { echo "SKIP: $*"; exit 77; }
hard() { echo "FAIL: $*"; exit 1; }

if ! "$PYTHON" -c 'import torch, torch.distributed as d, numpy; assert d.is_available()' 2>/dev/null; then
	skip "torch (with torch.distributed and numpy) is not importable by $PYTHON"
fi
[ -f "$job" ] || hard "$job not found"

if [ -z "${ROCESHIM_RUN:-}" ] && [ -n "$builddir" ] &&
   [ -x "$builddir/tools/roceshim-run" ]; then
	ROCESHIM_RUN=$builddir/tools/roceshim-run
fi
if [ -z "${ROCESHIM_STAT:-}" ] && [ -n "$builddir" ] &&
   [ -x "$builddir/tools/roceshim-stat" ]; then
	ROCESHIM_STAT=$builddir/tools/roceshim-stat
fi
if [ -z "${ROCESHIM_LIB:-}" ] && [ -n "$builddir" ] &&
   [ -f "$builddir/src/.libs/libroceshim.so" ]; then
	export ROCESHIM_LIB=$builddir/src/.libs/libroceshim.so
fi
[ -n "${ROCESHIM_RUN:-}" ] || hard "ROCESHIM_RUN is not set"
[ -n "${ROCESHIM_STAT:-}" ] || hard "ROCESHIM_STAT is not set"
export ROCESHIM_RUN ROCESHIM_STAT

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gloo.XXXXXX") || hard "mktemp failed"
launcher=
cleanup() {
	# the launcher stops its ranks on SIGTERM
	if [ -n "$launcher" ] && kill -TERM "$launcher" 2>/dev/null; then
		wait "$launcher" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted"; exit 130' INT TERM

echo "# gloo job: $job"
echo "# python $PYTHON, run $ROCESHIM_RUN, stat $ROCESHIM_STAT"
echo "# worlds: $worlds; ops: $ops; sizes: $sizes"

failures=0
nsizes=$(echo "$sizes" | tr ',' '\n' | grep -c .)
nops=$(echo "$ops" | tr ',' '\n' | grep -c .)

run_job() {
	local name=$1
	shift
	local start=$SECONDS rc
	# in the background, so that a signal to this script is handled now
	"$PYTHON" "$job" launch --ops "$ops" --sizes "$sizes" \
		--timeout "$timeout" "${extra[@]}" "$@" >"$tmp/$name.out" 2>&1 &
	launcher=$!
	wait "$launcher"
	rc=$?
	launcher=
	if [ "$rc" -eq 0 ]; then
		echo "ok   $name ($((SECONDS - start)) s)"
		return 0
	fi
	echo "FAIL $name ($((SECONDS - start)) s); job output:"
	grep -v '^digest ' "$tmp/$name.out" | sed 's/^/    /'
	failures=$((failures + 1))
	return 1
}

for world in $worlds; do
	plain=world$world-plain
	pre=world$world-preload
	run_job "$plain" --world "$world" --digests-out "$tmp/$plain.dig" ||
		continue
	run_job "$pre" --world "$world" --preload --check-stats \
		--expect-transport "$transport" --digests-out "$tmp/$pre.dig" || continue

	want=$((world * nops * nsizes))
	got=$(wc -l <"$tmp/$plain.dig")
	if [ "$got" -ne "$want" ]; then
		echo "FAIL world $world: plain run gave $got digests, expected $want"
		failures=$((failures + 1))
	elif cmp -s "$tmp/$plain.dig" "$tmp/$pre.dig"; then
		echo "ok   world $world: $got digests identical plain vs preload"
	else
		echo "FAIL world $world: digests differ plain vs preload:"
		diff "$tmp/$plain.dig" "$tmp/$pre.dig" | sed 's/^/    /'
		failures=$((failures + 1))
	fi
done

if [ "$failures" -ne 0 ]; then
	echo "FAIL: $failures check(s) failed"
	exit 1
fi
echo "PASS"
exit 0
