#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A mixed cluster: torchrun --nnodes 3 with a Gloo job of world 4, with
# default settings everywhere roceshim runs:
#   host1: two ranks under roceshim, with an rxe device (and the rendezvous)
#   host2: one rank without roceshim (an rxe device it does not use)
#   host3: one rank under roceshim, without an RDMA device
# Every rank checks its results.  The preloaded ranks check their stats
# (gloo_job.py --check-stats): the pair between host1's two ranks and
# their TCPStore connections are on RDMA; every connection to host2 stays
# on TCP because the peer has no roceshim (peer_rejected when host1 dialled
# a port first, negative_cache after, peer_tcp when host2 dialled), every
# connection of host3 stays on TCP for want
# of a device (no_device there; timeout, negative_cache or peer_tcp as host1
# sees it).
# It runs with ROCESHIM_SUITE_FULL=1 (bench/fabric-conformance) only:
# three torch agents starting in three emulated guests take minutes of
# CI's time, and test-echo checks the same reasons across hosts with
# 1 MB echoes.
set -u
if [ "${ROCESHIM_SUITE_FULL:-0}" != 1 ]; then
	echo "SKIP: the mixed torchrun cluster runs with ROCESHIM_SUITE_FULL=1"
	exit 77
fi
PYTHON=${PYTHON:-/usr/bin/python3}
job="$top_srcdir/tests/integration/gloo_job.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-mixed.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

h1=$ROCESHIM_FABRIC_HOST1
h2=$ROCESHIM_FABRIC_HOST2
h3=$ROCESHIM_FABRIC_HOST3
port=29511
torchrun=(timeout 700 "$PYTHON" "$top_srcdir/tests/cluster/torchrun.py"
	--nnodes 3 --master_addr "$h1" --master_port "$port")
rank=("$job" rank --world 4 --sizes 4K,256K --ifname wire0)

bg2=$(rsf-exec --bg host2 "${torchrun[@]}" --node_rank 1 \
	--nproc_per_node 1 "${rank[@]}" --join-stats-check)
bg3=$(rsf-exec --bg host3 "$ROCESHIM_RUN" "${torchrun[@]}" --node_rank 2 \
	--nproc_per_node 1 "${rank[@]}" --check-stats \
	--expect-transport tcp:no_device)
"$ROCESHIM_RUN" "${torchrun[@]}" --node_rank 0 --nproc_per_node 2 \
	"${rank[@]}" --check-stats --expect-transport rdma \
	--expect-peer "$h2=tcp:peer_rejected,negative_cache,peer_tcp" \
	--expect-peer "$h3=tcp:timeout,negative_cache,peer_tcp" \
	>"$tmp/host1" 2>&1
echo "rc $?" >>"$tmp/host1"
rsf-exec --wait "$bg2" >"$tmp/host2" 2>&1
echo "rc $?" >>"$tmp/host2"
rsf-exec --wait "$bg3" >"$tmp/host3" 2>&1
echo "rc $?" >>"$tmp/host3"

for h in host1 host2 host3; do
	grep -q '^rc 0$' "$tmp/$h" || tail -n 20 "$tmp/$h" | sed "s/^/    $h: /"
done
check_eq every_node_succeeds "rc 0 rc 0 rc 0" \
	"$(grep -h '^rc ' "$tmp/host1" "$tmp/host2" "$tmp/host3" |
		tr '\n' ' ' | sed 's/ $//')"
check_eq every_rank_done 4 "$(grep -h '"type": "done"' "$tmp"/host? |
	grep -c '"ok": true')"
check_eq stats_checked_on_every_preloaded_rank 3 \
	"$(grep -h '"type": "stats_check"' "$tmp/host1" "$tmp/host3" |
		grep -c '"problems": \[\]')"
check_eq host2_rank_has_no_stats 0 \
	"$(grep -c '"type": "stats_check"' "$tmp/host2")"
finish
