#!/bin/bash
# SPDX-License-Identifier: MIT
#
# host2 crashes (its qemu is killed) in the middle of the all_reduces of a
# two-node torchrun job: two ranks per host, default settings (Gloo's
# pairs on RDMA), c10d rendezvous hosted on host1, --max_restarts 1.
#   - host1's ranks must fail, not hang: their agent sees a worker fail
#     within $bound_s s of the crash;
#   - host2 boots again (for the tests after this one).
# ROCESHIM_SUITE_FULL=1 lets the agents restart the job once
# (--max_restarts 1): a new agent on the rebooted host2 joins the
# rendezvous, the job runs once more, every rank checks its results, and
# both agents end with status 0.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
job="$top_srcdir/tests/integration/gloo_job.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-crash.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# Gloo's own timeout; a rank blocked on the dead host ends by then at the
# latest, whatever the transport.
pg_timeout_s=60
bound_s=$((pg_timeout_s + 60))
restarts=0
[ "${ROCESHIM_SUITE_FULL:-0}" = 1 ] && restarts=1
# node HOST_FLAG: one torchrun agent's command line
node() {
	echo env "$ROCESHIM_RUN" timeout 1500 "$PYTHON" \
		"$top_srcdir/tests/cluster/torchrun.py" --nnodes 2 \
		--nproc_per_node 2 --rdzv_backend c10d \
		--rdzv_endpoint "$ROCESHIM_FABRIC_HOST1:29601" --rdzv_id crash \
		--rdzv_conf "is_host=$1" --max_restarts "$restarts" \
		--monitor_interval 1 \
		"$job" rank --world 4 --ops all_reduce --sizes 64K --iters 4 \
		--repeat-for 30 --ifname wire0 --pg-timeout "$pg_timeout_s"
}

# shellcheck disable=SC2046 # word splitting wanted: no spaces inside
first=$(rsf-exec --bg host2 $(node 0))
# shellcheck disable=SC2046
$(node 1) >"$tmp/host1" 2>&1 &
agent1=$!
if ! wait_for "$tmp/host1" "process group up" 3000; then
	echo "FAIL: the job did not start"
	cat "$tmp/host1"
	exit 1
fi
sleep 5
rsf-exec --crash host2
crash=$(date +%s)
echo "# host2 crashed"
# When host1's agent sees its workers fail, timed while host2 boots.
(wait_for "$tmp/host1" "failed \(exitcode" $((bound_s * 10)) &&
	date +%s >"$tmp/failed_at") &
watcher=$!
rsf-exec --boot host2
echo "# host2 is back after $(($(date +%s) - crash)) s"
wait "$watcher"
failed_after=99999
[ -s "$tmp/failed_at" ] && failed_after=$(($(cat "$tmp/failed_at") - crash))
echo "# host1's agent saw its workers fail $failed_after s after the crash"
check survivors_fail_within_bound test "$failed_after" -le "$bound_s"
if [ "$restarts" = 0 ]; then
	# Without a restart, the agent now waits for host2's lost agent at
	# its exit barrier (300 s), in a call that defers its SIGTERM
	# handler until it returns: its part is over.
	pkill -KILL -f -- "--rdzv_id crash"
	wait "$agent1"
	sed 's/^/    host1: /' "$tmp/host1" | grep -v '^    host1: @@' |
		tail -n 20
	: "$first"
	finish
	exit
fi
# Its new agent joins only then: one that joined first would have host1's
# agent restart the survivors, which could then hang without being seen.
# shellcheck disable=SC2046
second=$(rsf-exec --bg host2 $(node 0))
wait "$agent1"
rc1=$?
rsf-exec --wait "$second" >"$tmp/host2" 2>&1
rc2=$?
sed 's/^/    host1: /' "$tmp/host1" | grep -v '^    host1: @@' | tail -n 60
tail -n 30 "$tmp/host2" | sed 's/^/    host2: /'
: "$first"
# Two rounds of host1's two ranks: the first, then the restart's.
check_eq host1_agent_restarts_the_job 4 \
	"$(grep -c "process group up" "$tmp/host1")"
check_eq host1_agent_exits_0 0 "$rc1"
check_eq host2_new_agent_exits_0 0 "$rc2"
check_eq every_rank_done_after_the_restart 4 \
	"$(cat "$tmp/host1" "$tmp/host2" | grep '"type": "done"' |
		grep -c '"ok": true')"
finish
