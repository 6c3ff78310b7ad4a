#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A burst of 1000 concurrent non-blocking connects from one asyncio event
# loop into a listener in the same loop (tests/fabric/burst.py), over TCP
# (ROCESHIM_RDMA=0) and with RDMA on: every byte comes back both times,
# and no connect() call waits for a handshake.  A burst of 200 must end
# mostly on RDMA.  (Under this emulator a connection's RDMA setup costs
# several milliseconds of the progress thread: of 1000 at once, those
# whose handshake does not finish within ROCESHIM_CONNECT_TIMEOUT_MS use
# TCP, with both ends agreeing.)  The times are printed side by side;
# bench/fabric-bench reports them as a benchmark row.  Rings of 16 KiB:
# 2000 connection ends in one guest process.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
burst="$top_srcdir/tests/fabric/burst.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-burst.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
# Each upgraded connection end holds 2 or 3 descriptors of roceshim's, and
# one process holds both ends of every connection here.
ulimit -n 16384

# run NAME RDMA CONNS
run() {
	ROCESHIM_RDMA=$2 ROCESHIM_RING_KB=16 timeout 600 \
		"$ROCESHIM_RUN" "$PYTHON" "$burst" "$ROCESHIM_FABRIC_ADDR_B" \
		--conns "$3" >"$tmp/$1" 2>&1
	echo "rc $?" >>"$tmp/$1"
	grep -v '^ ' "$tmp/$1" | sed "s/^/    $1: /"
	check_eq "${1}_burst_byte_exact" "burst ok" \
		"$(grep -m1 '^burst ' "$tmp/$1")"
	# The 90th percentile: a guest whose vCPU the host stalls makes
	# one call slow now and then; a connect that waited for its handshake
	# makes them all slow.
	check "${1}_connect_calls_return_at_once" awk \
		'$1 == "p90_connect_ms" {exit !($2 < 50)}' "$tmp/$1"
}
field() { awk -v k="$2" '$1 == k {print $3 == "of" ? $2 " " $4 : $2}' "$tmp/$1"; }

run tcp1000 0 1000
run rdma1000 1 1000
run rdma200 1 200
read -r on total <<<"$(field rdma200 rdma)"
check most_of_200_on_rdma test "${on:-0}" -gt $((${total:-0} / 2))
echo "# burst of 1000: tcp $(field tcp1000 seconds) s," \
	"rdma $(field rdma1000 seconds) s ($(field rdma1000 rdma | tr ' ' /)" \
	"connection ends on RDMA)"
finish
