#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Rings that grow and shrink with the traffic (docs/design.md, "Rings that
# grow and shrink"), with default settings: one connection, both ends in
# one process (tests/fabric/rings.py), from the A address to the B
# address.  After each step roceshim-stat reads the process:
#   start     -> both ends' rings at 64 KiB, 128 KiB pinned an end
#   stream    -> 16 MiB byte-exact; the receiver's ring grown to 256 KiB
#                in one step, the sender's staging ring with it
#   idle      -> every ring at 16 KiB, the shrink counted, 32 KiB pinned
#                an end
#   bursts    -> both ways at once, with pauses (one longer than an idle
#                ring waits): byte-exact, the rings grown again
#   zerocopy  -> blocking 1 MiB sends, which go out of the program's
#                memory while the ring may still change size: byte-exact
# Then one thread sends 200 KB before it reads any: sendall returns in
# time, the unread end's ring grown with nobody reading it.
# Then as nobody with RLIMIT_MEMLOCK 384 KiB: the rings cannot grow past
# it, the stream is byte-exact all the same, the connection stays on RDMA
# and the refusals are counted.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-rings.XXXXXX") || exit 1
chmod 755 "$tmp"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
rings=$top_srcdir/tests/fabric/rings.py

# run NAME [PREFIX...] -- [rings.py ARGS]: drives rings.py step by step,
# keeping roceshim-stat's JSON of each step in $tmp/NAME.STEP.json.
run() {
	local name=$1 line pid=
	shift
	local pre=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		pre+=("$1")
		shift
	done
	shift
	coproc RINGS { timeout 300 "${pre[@]}" "$ROCESHIM_RUN" "$PYTHON" \
		"$rings" "$ROCESHIM_FABRIC_ADDR_B" "$ROCESHIM_FABRIC_ADDR_A" \
		"$@" 2>"$tmp/$name.err"; }
	local child=$RINGS_PID
	while read -r line <&"${RINGS[0]}"; do
		echo "$line" >>"$tmp/$name.out"
		case $line in
		"pid "*) pid=${line#pid } ;;
		"step end") continue ;;
		"step "*)
			"$ROCESHIM_STAT" --json "$pid" \
				>"$tmp/$name.${line#step }.json" 2>&1
			;;
		*) continue ;;
		esac
		echo go >&"${RINGS[1]}"
	done
	wait "$child" 2>/dev/null
	sed "s/^/    $name: /" "$tmp/$name.out" "$tmp/$name.err"
}

# field NAME.STEP EXPR: EXPR over the step's stats, in Python: g is the
# process's rings, a and p the active and passive rows.
field() {
	"$PYTHON" - "$tmp/$1.json" "$2" <<'EOF' 2>/dev/null
import json, sys
d = json.load(open(sys.argv[1]))
rows = {c["role"]: c for c in d["connections"] if c["role"] != "listener"}
g, a, p = d["global"]["rings"], rows.get("active"), rows.get("passive")
print(eval(sys.argv[2]))
EOF
}
bytes_of() { awk -v s="$2" '$1 == "bytes" && $2 == s {print $3}' \
	"$tmp/$1.out"; }
ring() { field "$1" '"%d/%d %d" % ('"$2"'["rx_ring_bytes"] >> 10,
	'"$2"'["tx_ring_bytes"] >> 10, '"$2"'["pinned_bytes"] >> 10)'; }

run grow --
check_eq start_client_rings_64k "64/64 128" "$(ring grow.start a)"
check_eq start_server_rings_64k "64/64 128" "$(ring grow.start p)"
check_eq start_process_pins_256k 256 \
	"$(field grow.start 'g["pinned_bytes"] >> 10')"

check_eq stream_byte_exact ok "$(bytes_of grow stream)"
check_eq stream_grows_the_receivers_ring "256/64 320" "$(ring grow.stream p)"
check_eq stream_grows_the_senders_staging "64/256 320" "$(ring grow.stream a)"
check_eq stream_grows_in_one_step 1 "$(field grow.stream 'p["ring_grows"]')"

check_eq idle_server_at_16k "16/16 32" "$(ring grow.idle p)"
check_eq idle_client_at_16k "16/16 32" "$(ring grow.idle a)"
check_eq idle_shrink_counted 1 "$(field grow.idle 'p["ring_shrinks"]')"
check_eq idle_process_pins_64k 64 \
	"$(field grow.idle 'g["pinned_bytes"] >> 10')"

check_eq bursts_byte_exact ok "$(bytes_of grow bursts)"
check bursts_grow_rings_again test "$(field grow.bursts 'g["grows"]')" -gt 2

check_eq zerocopy_byte_exact ok "$(bytes_of grow zerocopy)"
check_eq zerocopy_on_rdma "rdma rdma" \
	"$(field grow.zerocopy 'a["transport"] + " " + p["transport"]')"

# One thread sends 200 KB and reads them only once sendall returned, as
# over kernel TCP's buffers: the receiving end answers the requests for
# a bigger ring with nobody reading it.
run unread -- --only unread,end
check_eq unread_byte_exact ok "$(bytes_of unread unread)"
check unread_sendall_returns_within_2s awk '$1 == "elapsed" {
	seen = 1; fast = $3 < 2 } END { exit !(seen && fast) }' "$tmp/unread.out"
check_eq unread_grows_the_receivers_ring "256/64 320" "$(ring unread.unread p)"

# Root may pin past RLIMIT_MEMLOCK (CAP_IPC_LOCK): this runs as nobody,
# with room for both ends' starting rings (256 KiB) and half as much.
run memlock prlimit --memlock=393216:393216 setpriv --reuid=65534 \
	--regid=65534 --clear-groups --inh-caps=-all -- \
	--only start,stream,end
check_eq memlock_stream_byte_exact ok "$(bytes_of memlock stream)"
check_eq memlock_stays_on_rdma "rdma rdma" \
	"$(field memlock.stream 'a["transport"] + " " + p["transport"]')"
check memlock_refusals_counted test \
	"$(field memlock.stream 'g["refused"]')" -gt 0
check memlock_pins_within_the_limit test \
	"$(field memlock.stream 'g["pinned_bytes"] >> 10')" -le 384
finish
