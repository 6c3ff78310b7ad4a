#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vfork stays a vfork in a process whose sockets have no RDMA state (here,
# on a host without RDMA, every socket): a subprocess that gets a
# connection as its stdio echoes it byte for byte; what its vfork child
# closed is still open and counted in the parent's stats; and a fork
# child made after it tracks its own connections.  (With upgraded
# connections a vfork is a fork: tests/fabric/test-vfork.sh.)  A fork
# made right after a vfork, with no call through roceshim between them
# (tests/integration/vfork_fork.c), tracks its own sockets.

set -u

PYTHON=${PYTHON:-/usr/bin/python3}
probe="$top_srcdir/tests/integration/vfork_probe.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-vfork.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

command -v strace >/dev/null || {
	echo "SKIP: strace not installed (apt-get install strace)"
	exit 77
}
if compgen -G "/sys/class/infiniband_verbs/uverbs*" >/dev/null; then
	echo "SKIP: this host has a verbs device; the fabric test covers it"
	exit 77
fi

# strace runs under the preload too; only the calls of its child count.
run_probe() {
	"$ROCESHIM_RUN" strace -f -qq -e trace=vfork,fork,clone,clone3 \
		-o "$tmp/trace" "$PYTHON" "$probe" "$ROCESHIM_STAT" \
		"$tmp/stat.json"
}
out=$(run_probe 2>"$tmp/err")
check_eq subprocess_on_a_connection_echoes_exactly "echo ok" \
	"$(grep '^echo' <<<"$out")"
check_eq parent_sockets_survive_the_vfork_child "after ok" \
	"$(grep '^after' <<<"$out")"
check_eq fork_after_vfork_tracks_its_own_connections "forked ok" \
	"$(grep '^forked' <<<"$out")"
check parent_rows_survive_what_the_vfork_child_closed \
	"$PYTHON" - "$tmp/stat.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
by_fd = {c["fd"]: c for c in s["connections"]}
lst = [c for c in s["connections"] if c["role"] == "listener"]
assert len(lst) == 1 and lst[0]["state"] == "listening", lst
cli = [c for c in s["connections"] if c["role"] == "active"]
# the first client sent 64 KiB and read them back; the second sent 4 bytes
first = [c for c in cli if c["tcp_tx_bytes"] == 65536]
assert len(first) == 1 and first[0]["state"] == "open", cli
assert first[0]["tcp_rx_bytes"] == 65536, first
PY
# The subprocess comes first, then the probe's own fork.
check_eq subprocess_is_a_real_vfork "vfork clone" \
	"$(grep -oE '^[0-9]+ +(vfork|clone3?|fork)\(' "$tmp/trace" |
		awk '{ sub(/\(/, "", $2); print $2 }' | head -2 | paste -sd' ')"
check nothing_logged test ! -s "$tmp/err"

check_eq fork_right_after_a_vfork_tracks_its_sockets "forked ok" \
	"$("$ROCESHIM_RUN" "$top_builddir/tests/integration/vfork_fork")"

out=$(sh -c '/bin/false; echo "status $?"; i=0
	while [ $i -lt 20 ]; do /bin/true || exit 1; i=$((i + 1)); done
	echo "loop $i"' 2>&1)
preloaded=$("$ROCESHIM_RUN" sh -c '/bin/false; echo "status $?"; i=0
	while [ $i -lt 20 ]; do /bin/true || exit 1; i=$((i + 1)); done
	echo "loop $i"' 2>&1)
check_eq shell_commands_keep_their_status "$out" "$preloaded"

finish
