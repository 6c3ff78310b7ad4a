#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A full /dev/shm (leaked segments, a container's small one): a preloaded
# program's first connection finds no room for its stats segment, so
# stats are off, with one warning, and the program runs as it would
# without roceshim, with the RDMA path off and on.  Before, the segment
# was sized sparse, and the first store into one of its pages killed the
# program with SIGBUS.  Each program (tests/fabric/peer.py's echo server
# and client) runs in a mount namespace of its own with a 64 KiB tmpfs
# on /dev/shm, filled.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-shm-full.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# full_shm LOG ARGS...: peer.py ARGS under roceshim, /dev/shm full.
full_shm() {
	unshare -m /bin/bash -c '
		mount -t tmpfs -o size=64k roceshim-full /dev/shm || exit 3
		dd if=/dev/zero of=/dev/shm/filler bs=4k 2>/dev/null
		log=$1
		shift
		ROCESHIM_LOG_FILE=$log timeout 60 "$ROCESHIM_RUN" "$@"
	' full "$@"
}

for way in tcp rdma; do
	rdma=0
	[ "$way" = rdma ] && rdma=1
	export ROCESHIM_RDMA=$rdma
	full_shm "$tmp/$way.server.log" "$PYTHON" "$peer" serve \
		"$ROCESHIM_FABRIC_ADDR_A" --count 1 >"$tmp/$way.server" 2>&1 &
	server=$!
	port=$(peer_port "$tmp/$way.server")
	full_shm "$tmp/$way.client.log" "$PYTHON" "$peer" echo \
		"$ROCESHIM_FABRIC_ADDR_A" "${port:-0}" >"$tmp/$way.client" 2>&1
	echo "rc $?" >>"$tmp/$way.client"
	wait "$server"
	echo "rc $?" >>"$tmp/$way.server"
	sed "s/^/    $way: /" "$tmp/$way".*
	check_eq "${way}_client_runs_with_dev_shm_full" "echo ok rc 0" \
		"$(grep -E '^(echo|rc) ' "$tmp/$way.client" | tr '\n' ' ' |
			sed 's/ $//')"
	check_eq "${way}_server_runs_with_dev_shm_full" "rc 0" \
		"$(grep '^rc ' "$tmp/$way.server")"
	check_eq "${way}_both_say_stats_are_off" "1 1" \
		"$(grep -c 'stats are off' "$tmp/$way.server.log") $(grep -c 'stats are off' "$tmp/$way.client.log")"
done
unset ROCESHIM_RDMA
finish
