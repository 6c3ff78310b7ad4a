#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vfork stays a vfork in a process whose sockets have no RDMA state (here,
# on a host without RDMA, every socket): a subprocess that gets a
# connection as its stdio echoes it byte for byte, and the parent's
# sockets are untouched by what its vfork child closed.  (With upgraded
# connections a vfork is a fork: tests/fabric/test-vfork.sh.)

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
		-o "$tmp/trace" "$PYTHON" "$probe"
}
out=$(run_probe 2>"$tmp/err")
check_eq subprocess_on_a_connection_echoes_exactly "echo ok" \
	"$(grep '^echo' <<<"$out")"
check_eq parent_sockets_survive_the_vfork_child "after ok" \
	"$(grep '^after' <<<"$out")"
check vfork_is_a_real_vfork grep -q 'vfork()' "$tmp/trace"
check no_fork_instead bash -c "! grep -q 'clone(.*SIGCHLD' '$tmp/trace'"
check nothing_logged test ! -s "$tmp/err"

out=$(sh -c '/bin/false; echo "status $?"; i=0
	while [ $i -lt 20 ]; do /bin/true || exit 1; i=$((i + 1)); done
	echo "loop $i"' 2>&1)
preloaded=$("$ROCESHIM_RUN" sh -c '/bin/false; echo "status $?"; i=0
	while [ $i -lt 20 ]; do /bin/true || exit 1; i=$((i + 1)); done
	echo "loop $i"' 2>&1)
check_eq shell_commands_keep_their_status "$out" "$preloaded"

finish
