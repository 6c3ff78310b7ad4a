#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The ring transport (src/transport.c) between rxe1 (server) and rxe0
# (client): byte-exact streams both ways, partial sends on a full ring,
# MSG_PEEK, EOF after shutdown; prints its bandwidth and latency.  The
# veth counters prove the bytes crossed vethA -> vethB.
set -u
tx0=$(cat /sys/class/net/vethA/statistics/tx_bytes)
"$top_builddir/tests/fabric/transport_check" \
	"$ROCESHIM_FABRIC_ADDR_B" "$ROCESHIM_FABRIC_ADDR_A"
rc=$?
tx1=$(cat /sys/class/net/vethA/statistics/tx_bytes)
echo "# vethA tx +$((tx1 - tx0)) bytes"
# 32 MiB each way crossed the link at least once.
if [ "$rc" -eq 0 ] && [ $((tx1 - tx0)) -lt $((32 << 20)) ]; then
	echo "FAIL: the transfers did not cross vethA"
	exit 1
fi
exit "$rc"
