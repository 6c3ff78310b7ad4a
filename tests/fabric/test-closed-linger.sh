#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A client that wrote and closed before it received a byte keeps its end
# until the server has read its bytes (tests/fabric/closed_linger.py),
# default settings: the epoll entries its closed descriptor made go with
# the close, as over TCP, so that the server's reset reaches no epoll set
# with the program's stale data.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/closed_linger.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-closed-linger.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

timeout 60 "$ROCESHIM_RUN" "$PYTHON" "$script" "$ROCESHIM_FABRIC_ADDR_B" \
	--bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/out" 2>&1
echo "rc $?" >>"$tmp/out"
sed 's/^/    /' "$tmp/out"
check_eq closed_socket_reports_no_epoll_event "events 0" \
	"$(grep '^events ' "$tmp/out")"
check_eq connection_was_on_rdma "row rdma none" "$(grep '^row ' "$tmp/out")"
finish
