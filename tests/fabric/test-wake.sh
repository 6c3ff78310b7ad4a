#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A program that waits in epoll_wait() (as Gloo does) or poll() on an
# upgraded socket is woken by the completion itself: the transport's
# completion channel is in what it waits on, and its own call takes the
# event.  The progress thread sleeps meanwhile: 200 one-byte round trips
# through an echo server cost it a handful of context switches, where
# waking it for every arrival (and the program through an eventfd after
# it) cost one or more each.  Every byte comes back, on RDMA.  Waiting in
# epoll_wait(), a round trip costs the client one write(2), rxe's
# doorbell: the eventfd that the wrapper reports for it is left alone
# (it cost a second write and a read per message).
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-wake.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# wait_echo WAIT: 200 round trips, the client waiting in WAIT
wait_echo() {
	local port switches writes
	"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$ROCESHIM_FABRIC_ADDR_B" \
		--linger 120 --until-echoed >"$tmp/$1.srv" 2>&1 &
	port=$(peer_port "$tmp/$1.srv")
	"$ROCESHIM_RUN" "$PYTHON" "$peer" wait-echo \
		"$ROCESHIM_FABRIC_ADDR_B" "$port" --wait "$1" --count 200 \
		--bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/$1.cli" 2>&1
	sed 's/^/    /' "$tmp/$1.cli"
	check_eq "${1}_conn_on_rdma" "conn rdma none" \
		"$(grep -m1 '^conn ' "$tmp/$1.cli")"
	check_eq "${1}_every_byte_comes_back" ok \
		"$(awk '$1 == "echo" {print $2}' "$tmp/$1.cli")"
	switches=$(awk '$1 == "progress_switches" {print $2}' "$tmp/$1.cli")
	check "${1}_is_woken_without_the_progress_thread" \
		[ "${switches:-9999}" -lt 20 ]
	[ "$1" = epoll ] || return 0
	writes=$(awk '$1 == "writes_per_round_trip" {print $2}' "$tmp/$1.cli")
	check "epoll_round_trip_writes_only_the_doorbell" \
		awk -v w="${writes:-9}" 'BEGIN { exit !(w < 1.5) }'
}

wait_echo epoll
wait_echo poll

# signal_wait WAIT: a wait that polls before it sleeps (here for up to
# 1 s) still ends at once when a signal handler runs, as the kernel's
# returns EINTR; Python then raises from the handler.  A wait that polled
# on takes a second or more every time; a host that stalls the guest can
# make one run slow, so a slow run is tried again, three runs at most.
signal_wait() {
	local port try ms limit_ms=900
	for try in 1 2 3; do
		"$ROCESHIM_RUN" "$PYTHON" "$peer" serve \
			"$ROCESHIM_FABRIC_ADDR_B" --linger 120 --until-echoed \
			>"$tmp/sig$1.$try.srv" 2>&1 &
		port=$(peer_port "$tmp/sig$1.$try.srv")
		ROCESHIM_SPIN_US=1000000 "$ROCESHIM_RUN" "$PYTHON" "$peer" \
			signal-wait "$ROCESHIM_FABRIC_ADDR_B" "$port" \
			--wait "$1" --bind "$ROCESHIM_FABRIC_ADDR_A" \
			>"$tmp/sig$1.cli" 2>&1
		sed 's/^/    /' "$tmp/sig$1.cli"
		ms=$(awk '$1 == "wait_ms" {print $2}' "$tmp/sig$1.cli")
		[ -n "$ms" ] && [ "$ms" -lt "$limit_ms" ] && break
		echo "    run $try of 3: wait_ms ${ms:-none}"
	done
	check_eq "${1}_signal_conn_on_rdma" "conn rdma none" \
		"$(grep -m1 '^conn ' "$tmp/sig$1.cli")"
	check_eq "${1}_wait_interrupted_by_signal" yes \
		"$(awk '$1 == "interrupted" {print $2}' "$tmp/sig$1.cli")"
	check "${1}_wait_ends_when_the_handler_runs" awk -v ms="$ms" \
		-v limit="$limit_ms" 'BEGIN { exit !(ms != "" && ms < limit) }'
}
signal_wait epoll
signal_wait poll
finish
