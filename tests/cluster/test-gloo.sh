#!/bin/bash
# SPDX-License-Identifier: MIT
#
# torchrun --nnodes 2 --nproc-per-node 2: a Gloo job (all_reduce,
# broadcast, all_gather, send/recv) with two ranks on host1 and two on
# host2, rendezvous on host1, Gloo's pairs on wire0, with default
# settings: every rank checks its results against their exact values and
# that every one of its Gloo pair connections is on RDMA (gloo_job.py
# --check-stats).  ROCESHIM_SUITE_FULL=1 runs it once more with the RDMA
# path off, and both runs' digests must match.
# tests/cluster/torchrun.py is torchrun with a fix Debian 12's torch needs.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
job="$top_srcdir/tests/integration/gloo_job.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gloo.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# run NAME RDMA PORT: both nodes; each node's output in $tmp/NAME.K
run() {
	local transport=tcp bg
	[ "$2" = 1 ] && transport=rdma
	local -a node=(env ROCESHIM_RDMA="$2" "$ROCESHIM_RUN" timeout 900
		"$PYTHON" "$top_srcdir/tests/cluster/torchrun.py"
		--nnodes 2 --nproc_per_node 2
		--master_addr "$ROCESHIM_FABRIC_HOST1" --master_port "$3")
	local -a rank=("$job" rank --world 4 --sizes 4K,256K --ifname wire0
		--check-stats --expect-transport "$transport")
	bg=$(rsf-exec --bg host2 "${node[@]}" --node_rank 1 "${rank[@]}")
	"${node[@]}" --node_rank 0 "${rank[@]}" >"$tmp/$1.1" 2>&1
	echo "rc $?" >>"$tmp/$1.1"
	rsf-exec --wait "$bg" >"$tmp/$1.2" 2>&1
	echo "rc $?" >>"$tmp/$1.2"
	if ! grep -q '^rc 0$' "$tmp/$1.1" || ! grep -q '^rc 0$' "$tmp/$1.2"; then
		tail -n 15 "$tmp/$1.1" | sed "s/^/    $1 host1: /"
		tail -n 15 "$tmp/$1.2" | sed "s/^/    $1 host2: /"
	fi
	check_eq "${1}_both_nodes_succeed" "rc 0 rc 0" \
		"$(grep -h '^rc ' "$tmp/$1.1" "$tmp/$1.2" | tr '\n' ' ' |
			sed 's/ $//')"
	check_eq "${1}_every_rank_done" 4 \
		"$(grep -h '"type": "done"' "$tmp/$1.1" "$tmp/$1.2" |
			grep -c '"ok": true')"
}
digests() {
	grep -h '"type": "digest"' "$tmp/$1.1" "$tmp/$1.2" | sed 's/^@@ //' |
		sort
}

run rdma 1 29502
check stats_checked_on_every_rank test "$(grep -h '"type": "stats_check"' \
	"$tmp/rdma.1" "$tmp/rdma.2" | grep -c '"problems": \[\]')" -eq 4
check digests_present test -n "$(digests rdma)"
if [ "${ROCESHIM_SUITE_FULL:-0}" = 1 ]; then
	run tcp 0 29501
	check_eq digests_identical_over_tcp_and_rdma "$(digests tcp)" \
		"$(digests rdma)"
fi
finish
