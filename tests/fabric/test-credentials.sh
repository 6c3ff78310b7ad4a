#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A process that changes its credentials (setuid() and the like, as a
# daemon that drops root does) once roceshim has opened RDMA descriptors:
# the kernel refuses those descriptors from then on ("changed security
# contexts after opening file descriptor").  Its connections move to TCP
# before the change, byte for byte, with the bytes in flight; its later
# connections stay on TCP from the start (reason unsupported), so no peer
# commits to RDMA with it.  A server that drops root after it listens
# refuses RDMA handshakes at once: its clients use TCP without waiting
# for the handshake's timeout.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-credentials.XXXXXX") || exit 1
chmod 755 "$tmp"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: setuid() needs root"
	exit 77
fi
field() { awk -v k="$2" '$1 == k {print $2}' "$tmp/$1" | head -n 1; }
conn_line() { grep '^conn ' "$tmp/$1" | sed -n "${2}p"; }

# A client that drops root with a connection open, then connects again.
"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$ROCESHIM_FABRIC_ADDR_B" \
	--count 2 --linger 120 --until-echoed >"$tmp/srv" 2>&1 &
port=$(peer_port "$tmp/srv")
"$ROCESHIM_RUN" "$PYTHON" "$peer" setuid "$ROCESHIM_FABRIC_ADDR_B" "$port" \
	--bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/cli" 2>&1
echo "rc $?" >>"$tmp/cli"
sed 's/^/    client: /' "$tmp/cli"
check_eq client_exit 0 "$(field cli rc)"
check_eq conn_on_rdma_before "conn rdma none" "$(conn_line cli 1)"
check_eq echo_before ok "$(field cli before)"
check_eq bytes_in_flight_arrive ok "$(field cli rest)"
check_eq echo_after ok "$(field cli after)"
check_eq conn_moved_by_the_change "conn tcp none moved:credentials" \
	"$(conn_line cli 2)"
check_eq new_conn_stays_on_tcp "conn tcp unsupported" "$(conn_line cli 3)"
check_eq echo_on_new_conn ok "$(field cli new)"

# A server that changes its credentials after it listens: it drops root
# (setuid), or changes them on the calling thread alone, with capset()
# (libcap's way), prctl() or a raw system call.  A handshake that waited
# for its timeout would take 10 s (refused_echo checks the connect).
for how in setuid capset prctl syscall; do
	"$ROCESHIM_RUN" "$PYTHON" "$peer" drop-serve "$ROCESHIM_FABRIC_ADDR_B" \
		--how "$how" >"$tmp/$how-srv" 2>&1 &
	port=$(peer_port "$tmp/$how-srv")
	refused_echo "${how}_server_client" "$port"
	wait
	sed "s/^/    $how server: /" "$tmp/$how-srv"
	check_eq "${how}_server_conn_on_tcp" "conn tcp unsupported" \
		"$(grep -m1 '^conn ' "$tmp/$how-srv")"
done
finish
