#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A process that sets up io_uring, with liburing or with
# syscall(SYS_io_uring_setup), while a connection is in the middle of a
# stream, then reads and writes it through the ring
# (tests/fabric/io_uring_check.c): kernel TCP (ROCESHIM_RDMA=0) is the
# specification.  With RDMA on (default settings), the connection that
# was on RDMA moves to TCP at the ring's set-up (cause io_uring) and
# every byte arrives; a later connection stays on TCP (reason io_uring).
# Before, the ring's receives found the kernel socket idle and its sends
# went beside the stream.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_builddir/tests/fabric/io_uring_check"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-io-uring.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# count JSON SECTION NAME: global[SECTION][NAME] of a roceshim-stat report.
count() {
	"$PYTHON" -c 'import json, sys
print(json.load(open(sys.argv[1]))["global"][sys.argv[2]][sys.argv[3]])' \
		"$1" "$2" "$3" 2>/dev/null
}

for setup in liburing syscall; do
	for way in tcp rdma; do
		run_way "$way" "$prog" "$ROCESHIM_FABRIC_ADDR_A" \
			"$tmp/$way.json" "$setup"
		cp "$tmp/$way" "$tmp/$way.$setup"
		check_eq "${setup}_${way}_every_behaviour_as_specified" "0 0" \
			"$(grep -c '^FAIL' "$tmp/$way") $(awk '$1 == "rc" {print $2}' "$tmp/$way")"
	done
	check_eq "${setup}_same_behaviours_as_tcp" \
		"$(grep '^ok' "$tmp/tcp.$setup")" "$(grep '^ok' "$tmp/rdma.$setup")"
	# Both ends of the first connection were on RDMA and moved: one for
	# io_uring, the other, in the same process, at its peer's request
	# or for io_uring, whichever came first.
	moved=$(count "$tmp/rdma.json" downgrades io_uring)
	check_eq "${setup}_a_move_for_io_uring" yes \
		"$([ "${moved:-0}" -ge 1 ] && echo yes)"
	peer=$(count "$tmp/rdma.json" downgrades peer)
	check_eq "${setup}_both_ends_moved" 2 "$((${moved:-0} + ${peer:-0}))"
	# Both ends of the later one.
	check_eq "${setup}_later_connection_stays_on_tcp_for_io_uring" 2 \
		"$(count "$tmp/rdma.json" fallbacks io_uring)"
done
finish
