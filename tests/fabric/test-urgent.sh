#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Urgent data (MSG_OOB, tests/fabric/urgent.py): sent, waited for with
# select() and poll(), read with MSG_OOB, and inline with SO_OOBINLINE.
# Urgent data exists only in TCP, so a connection that sends or reads it
# moves to its kernel socket first (downgrade "urgent", and "peer" at the
# other end), and every
# observation is then the same as over kernel TCP (ROCESHIM_RDMA=0).
# Before, the urgent byte went inline over RDMA, and recv(MSG_OOB) took
# an ordinary byte out of the stream.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-urgent.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

for way in tcp rdma; do
	run_way "$way" "$PYTHON" "$top_srcdir/tests/fabric/urgent.py" \
		"$ROCESHIM_FABRIC_ADDR_A"
done
check_eq tcp_runs "rc 0" "$(grep '^rc' "$tmp/tcp")"
check_eq same_as_tcp "$(grep -v '^rows' "$tmp/tcp")" \
	"$(grep -v '^rows' "$tmp/rdma")"
# Both connections made on RDMA, now on TCP: the sending end moved for
# urgent data, the other with it (moved by its peer).
check_eq urgent_data_moves_to_tcp \
	"rows tcp:urgent tcp:peer tcp:urgent tcp:peer" \
	"$(grep '^rows' "$tmp/rdma")"
finish
