#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A program that opens connections until it runs out of descriptors
# (tests/fabric/fdfill.py: one process holds both ends of every pair),
# with default settings.  Every pair it gets echoes byte-exact, no call
# fails with anything but EMFILE, and select() over all of them works.
#   soft limit 1024, room above it  -> as many pairs as over TCP (give or
#                                      take a few of roceshim's own per
#                                      process), nearly all on RDMA:
#                                      roceshim's descriptors live above
#                                      the limit, out of the program's way
#   hard limit 256 (no room above)  -> some on RDMA, the surplus on TCP
#                                      with fd_limit, nothing else
#   RLIMIT_MEMLOCK 128 KiB (nobody) -> some on RDMA, the surplus on TCP
#                                      with memlock_limit
# And roceshim's own descriptors per upgraded connection end
# (tests/fabric/fdcount.py), by the way the program connects: a
# non-blocking connect keeps none beyond those of a blocking one; an end
# that waited for room to send gives the descriptor for that back once
# idle.
# Rings of 16 KiB: about a thousand connection ends in one guest process.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
fdfill="$top_srcdir/tests/fabric/fdfill.py"
fdcount="$top_srcdir/tests/fabric/fdcount.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-fd-limit.XXXXXX") || exit 1
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
export ROCESHIM_RING_KB=16

# fill NAME RDMA [ARGS...]: runs fdfill.py under the command prefix $pre
# (prlimit, setpriv)
pre=()
fill() {
	local name=$1 rdma=$2
	shift 2
	ROCESHIM_RDMA=$rdma timeout 600 "${pre[@]}" "$ROCESHIM_RUN" \
		"$PYTHON" "$fdfill" "$ROCESHIM_FABRIC_ADDR_B" "$@" \
		>"$tmp/$name" 2>&1
	echo "rc $?" >>"$tmp/$name"
	grep -v '^error: ' "$tmp/$name" | sed "s/^/    $name: /"
	grep -m5 '^error: ' "$tmp/$name" | sed "s/^/    $name: /"
	check_eq "${name}_byte_exact" ok "$(field "$name" bytes)"
	check_eq "${name}_no_error_but_emfile" "0 0" \
		"$(field "$name" errors) $(field "$name" rc)"
	check_eq "${name}_select_finds_every_socket" ok \
		"$(field "$name" select)"
}
field() { awk -v k="$2" '$1 == k {print $2; exit}' "$tmp/$1"; }
ends() { # NAME TRANSPORT [REASON]: connection ends on it
	awk -v t="$2" -v r="${3:-}" '$1 == "path" && $2 == t &&
		(r == "" || $3 == r) {n += $4} END {print n + 0}' "$tmp/$1"
}

pre=(prlimit --nofile=1024:65536)
fill tcp1024 0
fill rdma1024 1
tcp=$(field tcp1024 pairs)
rdma=$(field rdma1024 pairs)
check_eq soft_limit_runs_out_with_emfile "EMFILE EMFILE" \
	"$(field tcp1024 stop) $(field rdma1024 stop)"
check soft_limit_gives_as_many_pairs_as_tcp \
	test "${rdma:-0}" -ge $((${tcp:-0} - 8))
check soft_limit_pairs_are_on_rdma \
	test "$(ends rdma1024 rdma)" -ge $((2 * (${rdma:-0} - 3) - 16))

pre=(prlimit --nofile=256:256)
fill rdma256 1
check no_room_above_some_on_rdma test "$(ends rdma256 rdma)" -gt 0
check no_room_above_surplus_fd_limit test "$(ends rdma256 tcp fd_limit)" -gt 0
check_eq no_room_above_no_other_reason 0 \
	"$(awk '$1 == "path" && $2 == "tcp" && $3 != "fd_limit" &&
		$3 != "peer_tcp" && $3 != "peer_rejected" {n += $4}
		END {print n + 0}' "$tmp/rdma256")"

# Root may pin past RLIMIT_MEMLOCK (CAP_IPC_LOCK): this runs as nobody.
pre=(prlimit --memlock=131072:131072 setpriv --reuid=65534 --regid=65534
	--clear-groups --inh-caps=-all)
fill memlock 1 --max 20
check memlock_some_on_rdma test "$(ends memlock rdma)" -gt 0
check memlock_surplus_memlock_limit \
	test "$(ends memlock tcp memlock_limit)" -gt 0
for way in blocking timeout epoll; do
	timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$fdcount" \
		"$ROCESHIM_FABRIC_ADDR_B" "$way" --pairs 20 >"$tmp/fds-$way" 2>&1
	sed "s/^/    fds-$way: /" "$tmp/fds-$way"
done
timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$fdcount" "$ROCESHIM_FABRIC_ADDR_B" \
	blocking --pairs 20 --fill >"$tmp/fds-filled" 2>&1
sed "s/^/    fds-filled: /" "$tmp/fds-filled"
per_end() { awk -v w="${2:-$1}" '$1 == "fds" && $2 == w {print $3}' \
	"$tmp/fds-$1"; }
# Those a connection holds (a connect in the background uses a CM
# channel of its own, one per process).
per_conn() { grep -o '\[eventfd\]=[0-9]* \|\[infinibandevent\]=[0-9]*' \
	"$tmp/fds-$1" | tr -d '\n'; }
# One per end (in_fd), and a score or so per process (the devices'
# contexts, up to 8 completion hubs per device, the CM channel, the
# progress thread's set, timer and wake-up, the share region, the uevent
# socket) spread over the 40 ends.
check one_descriptor_per_upgraded_end awk -v n="$(per_end blocking)" \
	'BEGIN {exit !(n >= 1 && n <= 1.55)}'
# A client end that waited for room to send holds an eventfd for its
# writability (out_fd) beside in_fd, and gives it back once idle.
check_eq filled_bytes_exact ok "$(awk '$1 == "bytes" {print $2}' \
	"$tmp/fds-filled")"
# (20 of the 40 ends: half a descriptor more per end.)
check waiting_for_room_takes_a_descriptor_for_writability \
	awk -v n="$(per_end filled)" -v m="$(per_end filled filled-idle)" \
	'BEGIN {exit !(n - m >= 0.4)}'
check idle_end_gives_its_descriptor_for_writability_back \
	awk -v n="$(per_end filled filled-idle)" \
	'BEGIN {exit !(n >= 1 && n <= 1.55)}'
# A wait for writability (the end of a non-blocking connect) that finds
# room makes no eventfd for it.
check_eq nonblocking_connects_keep_no_more_descriptors \
	"$(per_conn blocking) $(per_conn blocking)" \
	"$(per_conn timeout) $(per_conn epoll)"
echo "# pairs until EMFILE at ulimit -n 1024: tcp $tcp, roceshim $rdma" \
	"($(ends rdma1024 rdma) ends on RDMA)"
finish
