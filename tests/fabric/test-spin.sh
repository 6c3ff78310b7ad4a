#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ROCESHIM_SPIN_US bounds the polling of a blocking read on an upgraded
# connection: a read that waits 3 s for its byte burns under 0.2 s of CPU
# with ROCESHIM_SPIN_US=0, and 0.4 to 2.5 s with ROCESHIM_SPIN_US=1000000
# (one second of polling, then sleep).  A connection whose reads keep
# waiting longer than that stops polling: twelve reads that wait 0.5 s each
# with ROCESHIM_SPIN_US=200000 burn well under the 2.4 s that polling each
# would.  Only one thread of a process on the fabric's two CPUs polls at a
# time: two threads that read 3 s each with ROCESHIM_SPIN_US=1000000 burn
# about what one does, not twice that.  Every read gets its byte on RDMA.
# And a process whose only connection idles does not wake: the 3 s read
# with ROCESHIM_SPIN_US=0 costs the whole process (its progress thread
# included) a handful of context switches, where a progress thread that
# ticked every 50 ms made 60.  Its progress thread is named "roceshim"
# (top -H, ps -L).
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-spin.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# idle_read NAME SPIN_US [DELAY COUNT CONNS]: COUNT blocking reads (1) that
# wait DELAY seconds (3) each, on each of CONNS connections (1) read by a
# thread each; sets cpu_ms
idle_read() {
	local port
	"$ROCESHIM_RUN" "$PYTHON" "$peer" late "$ROCESHIM_FABRIC_ADDR_B" \
		--delay "${3:-3}" --count "${4:-1}" --conns "${5:-1}" \
		>"$tmp/$1.srv" 2>&1 &
	port=$(peer_port "$tmp/$1.srv")
	ROCESHIM_SPIN_US=$2 "$ROCESHIM_RUN" "$PYTHON" "$peer" idle \
		"$ROCESHIM_FABRIC_ADDR_B" "$port" --count "${4:-1}" \
		--conns "${5:-1}" --bind "$ROCESHIM_FABRIC_ADDR_A" \
		>"$tmp/$1.cli" 2>&1
	sed 's/^/    /' "$tmp/$1.cli"
	check_eq "${1}_conn_on_rdma" "conn rdma none" \
		"$(grep -m1 '^conn ' "$tmp/$1.cli")"
	check_eq "${1}_read_gets_the_byte" ok \
		"$(awk '$1 == "read" {print $2}' "$tmp/$1.cli")"
	cpu_ms=$(awk '$1 == "cpu_s" {printf "%d", $2 * 1000}' "$tmp/$1.cli")
	switches=$(awk '$1 == "context_switches" {print $2}' "$tmp/$1.cli")
}

idle_read nospin 0
check no_spin_read_sleeps [ "${cpu_ms:-9999}" -lt 200 ]
check idle_process_does_not_wake [ "${switches:-9999}" -lt 15 ]
check_eq progress_thread_is_named "python3,roceshim" \
	"$(awk '$1 == "threads" {print $2}' "$tmp/nospin.cli")"
idle_read spin 1000000
check spin_read_polls_for_about_the_spin_time \
	test "${cpu_ms:-0}" -ge 400 -a "${cpu_ms:-0}" -lt 2500
spin_ms=${cpu_ms:-0}
idle_read two_readers 1000000 3 1 2
check two_readers_on_two_cpus_poll_one_at_a_time \
	[ "${cpu_ms:-9999}" -lt $((spin_ms * 3 / 2)) ]
idle_read slow_reads 200000 0.5 12
check slow_reads_stop_polling [ "${cpu_ms:-9999}" -lt 1500 ]
finish
