#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/roceshim-bench, cut down to one repetition of one size: it must
# exit 0, print a timed row for each variant with a ratio, write the CSV,
# and, where valgrind can run (not under ASan), count more client
# instructions per round trip preloaded than plain: equal counts would
# mean the preload never reached the client.
#
# Environment (set by the test harness): top_srcdir, top_builddir,
# ROCESHIM_LIB, ROCESHIM_RUN, SANITIZER_LIBASAN.

set -u

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-.}
[ -x "$builddir/bench/tcpbench" ] || skip "bench/tcpbench not built"
command -v python3 >/dev/null 2>&1 || skip "python3 not found"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

callgrind=(--callgrind-sizes 64)
if [ -n "${SANITIZER_LIBASAN:-}" ] ||
	! command -v valgrind >/dev/null 2>&1; then
	callgrind=(--skip-callgrind)
fi

python3 "$srcdir/bench/roceshim-bench" --builddir "$builddir" --quick \
	--reps 1 --skip-gloo --pingpong-sizes 64 --stream-sizes 64K \
	"${callgrind[@]}" --csv "$work/out.csv" >"$work/out.md" \
	2>"$work/err" || {
	cat "$work/err" "$work/out.md"
	fail "roceshim-bench exited non-zero"
}
cat "$work/out.md"

number='[0-9][0-9.]*'
grep -Eq "^\| tcp pingpong \| 64 B \| us \| $number .* \| $number .* \| $number \|$" \
	"$work/out.md" || fail "no timed ping-pong row with a ratio"
grep -Eq "^\| tcp stream \| 64 KiB \| MB/s \| $number .* \| $number .* \| $number \|$" \
	"$work/out.md" || fail "no timed stream row with a ratio"
[ "$(grep -c '^tcp ' "$work/out.csv")" = 2 ] || fail "CSV: not two rows"

# bench/preload-cost, one pair of short runs: every row timed, with a
# cost.  It checks itself that the preloaded runs mapped the library.
# An ASan library cannot be preloaded without its runtime: not here.
if [ -z "${SANITIZER_LIBASAN:-}" ]; then
	python3 "$srcdir/bench/preload-cost" --lib "$ROCESHIM_LIB" --reps 1 \
		--forks 20 --churn 50 \
		--workloads start-true,start-empty,fork-1,churn,idle \
		>"$work/cost.md" 2>"$work/cost.err" || {
		cat "$work/cost.err" "$work/cost.md"
		fail "preload-cost exited non-zero"
	}
	cat "$work/cost.md"
	for w in start-true start-empty fork-1 churn; do
		grep -Eq "^\| $w \| [^|]+ \| $number \| $number \| $number× \|" \
			"$work/cost.md" || fail "preload-cost: no $w row with a cost"
	done
	grep -Eq "^\| idle \| KiB RSS \| $number \| $number \|" \
		"$work/cost.md" || fail "preload-cost: no idle row"
fi

if [ "${callgrind[0]}" = --skip-callgrind ]; then
	echo "PASS (instruction counts not checked: valgrind cannot run here)"
	exit 0
fi
row=$(grep -E '^\| 64 B \| [0-9]+ \| [0-9]+ \| -?[0-9]+ \|$' "$work/out.md") ||
	fail "no instruction-count row"
read -r plain preload <<<"$(echo "$row" | awk -F'|' '{ print $3, $4 }')"
[ "$plain" -gt 0 ] || fail "plain client counted no instructions"
[ "$preload" -gt "$plain" ] ||
	fail "preloaded client ran no more instructions ($preload) than plain ($plain)"
echo "PASS (instructions per round trip: plain $plain, preloaded $preload)"
