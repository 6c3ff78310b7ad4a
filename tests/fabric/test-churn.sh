#!/bin/bash
# SPDX-License-Identifier: MIT
#
# 1000 RDMA connections opened, used and closed in one process: every
# byte checked, no fd left behind, every pinned byte given back (rings kept
# for the next connection included), and the RDMA resources (queue pairs)
# back to where they were.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
qps() { rdma resource show qp 2>/dev/null | grep -c 'lqpn'; }
before=$(qps)
"$ROCESHIM_RUN" "$PYTHON" "$top_srcdir/tests/fabric/peer.py" churn \
	"$ROCESHIM_FABRIC_ADDR_B" --count "${CHURN_COUNT:-1000}"
rc=$?
sleep 1
after=$(qps)
echo "queue pairs before $before, after $after"
if [ "$rc" -ne 0 ]; then
	echo "FAIL: churn failed (exit $rc)"
	exit 1
fi
if [ "$after" -gt "$before" ]; then
	echo "FAIL: queue pairs leaked"
	exit 1
fi
echo PASS
