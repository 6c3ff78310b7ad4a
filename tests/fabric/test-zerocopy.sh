#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Zero-copy sends (ROCESHIM_ZEROCOPY_KB): large blocking sends go out of
# the program's own buffer, and return only once their writes completed.
# netem holds the client's RoCE packets (vethB) for 20 ms, and a 2 MiB ring
# lets one window exceed the 128 packets that rxe sends before it waits
# for an ACK: the rest of a window leaves the buffer after ibv_post_send()
# has returned.  A send that returned before its completions would let
# sockcheck scribble over bytes still to go (or deregister them: a reset).
# The debug log shows which path each run took.
set -u
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-zerocopy.XXXXXX") || exit 1
trap 'tc qdisc del dev vethB root 2>/dev/null; rm -rf "$tmp"' EXIT
export ROCESHIM_RING_KB=2048 ROCESHIM_LOG_LEVEL=debug
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
sockcheck="$top_builddir/tests/integration/sockcheck"

delay_vethb 20ms

# large_sends NAME ZEROCOPY_KB: the two large-send tests; sets zerocopy,
# the number of zero-copy registrations in the log.
large_sends() {
	ROCESHIM_ZEROCOPY_KB=$2 ROCESHIM_LOG_FILE="$tmp/$1.log" \
		"$ROCESHIM_RUN" "$sockcheck" \
		--server-addr "$ROCESHIM_FABRIC_ADDR_A" \
		--client-addr "$ROCESHIM_FABRIC_ADDR_B" \
		--only '*large_send*' >"$tmp/$1.out" 2>&1
	check "${1}_sends_arrive_intact" grep -qx '2 passed, 0 failed' \
		"$tmp/$1.out"
	sed 's/^/    /' "$tmp/$1.out"
	zerocopy=$(grep -c 'zero-copy send of' "$tmp/$1.log")
	echo "# $1: $zerocopy zero-copy registrations"
	check "${1}_on_rdma" grep -q 'connect to .* on rdma' "$tmp/$1.log"
}

large_sends zerocopy 256
# Each large send registers its first piece (4 MiB at most) before
# anything else: 256 KiB, 1 MiB + 3, 5 MiB + 777 and 300 KiB + 1 in the
# first test, 1 MiB + 5 in the sendmsg(), 16 MiB in the timed-out send.
# The second piece of the 5 MiB send is copied instead when the ring can
# take the rest while the peer's credit is out, so it is not counted.
registered() {
	grep -c "zero-copy send of $1 bytes" "$tmp/zerocopy.log"
}
check zerocopy_sends_register_the_buffers [ "$zerocopy" -ge 6 ]
for size in 262144 1048579 307201 1048581; do
	check "zerocopy_registers_a_send_of_$size" [ "$(registered $size)" -ge 1 ]
done
check zerocopy_registers_each_4_mib_send [ "$(registered 4194304)" -ge 2 ]
large_sends copying 0
check_eq zerocopy_off_copies 0 "$zerocopy"
finish
