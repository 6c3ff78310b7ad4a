#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A burst of 500 non-blocking connects into a listener whose backlog is 16
# and which accepts nothing for its first second, in one process
# (tests/fabric/accept_burst.c), over TCP (ROCESHIM_RDMA=0) and with RDMA
# on.  The full accept queue makes the kernel drop the last ACK of some
# handshakes, or answer SYNs with cookies and drop their ACK.  Over TCP,
# each client's retransmitted bytes get it in once the queue drains; on a
# slow host some are dropped again and again, back off for minutes, or
# are given up (the client sees a reset or a timeout).  With RDMA on, such
# a connection must move to TCP (accept_queue) to get in the same way,
# where it would otherwise wait for ever.  In both runs every client must
# be read on exactly one accepted connection, see its connection fail,
# or still be retransmitting after 180 s: none may wait with nothing in
# flight, and no move to TCP may fail.  Rings of 16 KiB: 1000 connection
# ends in one guest process.
set -u
probe="$top_builddir/tests/fabric/accept_burst"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-accept-queue.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
ulimit -n 16384

# run NAME RDMA
run() {
	ROCESHIM_RDMA=$2 ROCESHIM_RING_KB=16 ROCESHIM_LOG_LEVEL=info \
		timeout 300 "$ROCESHIM_RUN" "$probe" "$ROCESHIM_FABRIC_ADDR_B" \
		"$ROCESHIM_FABRIC_ADDR_A" >"$tmp/$1" 2>"$tmp/$1.log"
	echo "rc $?" >>"$tmp/$1"
	echo "moved_accept_queue $(grep -c 'moved to TCP (accept_queue)' \
		"$tmp/$1.log")" >>"$tmp/$1"
	sed "s/^/    $1: /" "$tmp/$1"
	check_eq "${1}_leaves_no_client_waiting" "rc 0" \
		"$(grep '^rc ' "$tmp/$1")"
	# A failed move would reset its client, which the probe allows.
	check_eq "${1}_fails_no_move" 0 \
		"$(grep -c 'could not move to TCP' "$tmp/$1.log")"
}
field() { awk -v k="$2" '$1 == k {print $2}' "$tmp/$1"; }

run tcp 0
run rdma 1
summary() {
	echo "$1 $(field "$1" seconds) s ($(field "$1" failed) failed," \
		"$(field "$1" retrying) retrying)"
}
echo "# burst of 500, backlog 16: $(summary tcp), $(summary rdma);" \
	"$(field rdma moved_accept_queue) connection ends moved to TCP for" \
	"the full queue"
finish
