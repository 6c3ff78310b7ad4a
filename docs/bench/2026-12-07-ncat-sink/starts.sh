#!/bin/bash
# SPDX-License-Identifier: MIT
# What an ncat client costs to start and connect, plain, with the RDMA
# path off and by default: one at a time (three times), then 30 at once,
# into one `ncat -k -l` sink with roceshim.  Prints milliseconds.
# Run in the fabric, from the build tree, as sink.sh is.
set -u
A=$ROCESHIM_FABRIC_ADDR_A
B=$ROCESHIM_FABRIC_ADDR_B
port=20761
"$ROCESHIM_RUN" ncat -k -l "$B" $port >/dev/null 2>&1 &
sink=$!
trap 'kill $sink 2>/dev/null' EXIT
until ss -Hltn "sport = :$port" | grep -q .; do sleep 0.2; done
ms() {
	local s
	s=$(date +%s%N)
	"$@"
	echo $((($(date +%s%N) - s) / 1000000))
}
client() { "$@" ncat -s "$A" --send-only "$B" $port </dev/null; }
for rep in 1 2 3; do
	echo "one client, round $rep: plain $(ms client env) ms;" \
		"off $(ms client "$ROCESHIM_RUN" --no-rdma) ms;" \
		"default $(ms client "$ROCESHIM_RUN") ms"
done
for mode in plain off default; do
	case $mode in
	plain) run=(env) ;;
	off) run=("$ROCESHIM_RUN" --no-rdma) ;;
	default) run=("$ROCESHIM_RUN") ;;
	esac
	s=$(date +%s%N)
	pids=()
	for _ in $(seq 30); do
		client "${run[@]}" &
		pids+=($!)
	done
	wait "${pids[@]}"
	echo "30 clients at once, $mode: $((($(date +%s%N) - s) / 1000000)) ms"
done
