#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Socket options and receive flags whose meaning only kernel TCP gives
# (tests/fabric/sockopt.py): SO_RCVLOWAT on a connection, before
# connect(), while a non-blocking connect is under way (once, then at 40
# moments of it), before the server's accept(), and on a listener;
# TCP_INQ; SO_ZEROCOPY with its error-queue reports, and alone on a
# listener; TCP Fast Open's
# connect (TCP_FASTOPEN_CONNECT) with the server's cookie; SIGIO
# (O_ASYNC); an empty error queue (MSG_ERRQUEUE); MSG_TRUNC with a NULL
# buffer.  Every observation is the same as over kernel TCP
# (ROCESHIM_RDMA=0).  An upgraded connection that gets such an option
# moves to its kernel socket (downgrade "sockopt"); one that has it before
# connect() or listen() stays on TCP ("unsupported"); the receive flags
# keep it on RDMA.  SO_ZEROCOPY means something only to a send with
# MSG_ZEROCOPY, which moves the connection first.  Before, over RDMA: the low-water mark was ignored, no
# TCP_INQ message, zero-copy report or SIGIO came, MSG_ERRQUEUE took
# stream bytes, and MSG_TRUNC with a NULL buffer crashed the program;
# a Fast Open connect went on over RDMA while its kernel SYN waited for
# a write that never came, and the server never accepted it.
# The option set before accept() reset the connection after 5 s, and
# some of the sweep's connections were reset: a handshake that completed
# as the option gave it up left one end on RDMA and the other on TCP.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-sockopt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# TCP Fast Open for clients and servers: the server hands out cookies.
fastopen=$(sysctl -n net.ipv4.tcp_fastopen)
sysctl -qw net.ipv4.tcp_fastopen=3
for way in tcp rdma; do
	run_way "$way" "$PYTHON" "$top_srcdir/tests/fabric/sockopt.py" \
		"$ROCESHIM_FABRIC_ADDR_A"
done
sysctl -qw net.ipv4.tcp_fastopen="$fastopen"
check_eq tcp_runs "rc 0" "$(grep '^rc' "$tmp/tcp")"
check_eq same_as_tcp "$(grep -v '^row ' "$tmp/tcp")" \
	"$(grep -v '^row ' "$tmp/rdma")"
row() {
	sed -n "s/^row $1 //p" "$tmp/rdma"
}
check_eq rcvlowat_moves_connection "tcp none moved:sockopt" \
	"$(row rcvlowat_on_connection)"
check_eq rcvlowat_keeps_connect_on_tcp "tcp unsupported" \
	"$(row rcvlowat_before_connect)"
# Given up while the handshake runs (unsupported), or moved once made.
check_eq rcvlowat_while_connecting_ends_on_tcp tcp \
	"$(row rcvlowat_while_connecting | cut -d' ' -f1)"
check_eq rcvlowat_before_accept_moves_connection "tcp none moved:sockopt" \
	"$(row rcvlowat_before_accept)"
check_eq rcvlowat_keeps_listener_on_tcp "tcp unsupported" \
	"$(row rcvlowat_on_listener)"
check_eq inq_stays_on_rdma "rdma none" "$(row inq)"
check_eq inq_after_fin_stays_on_rdma "rdma none" "$(row inq_after_fin)"
check_eq inq_after_shut_rd_stays_on_rdma "rdma none" \
	"$(row inq_after_shut_rd)"
check_eq zerocopy_send_moves_connection "tcp none moved:sockopt" \
	"$(row zerocopy)"
check_eq zerocopy_alone_stays_on_rdma "rdma none" \
	"$(row zerocopy_on_listener)"
check_eq async_moves_connection "tcp none moved:sockopt" "$(row async)"
check_eq error_queue_stays_on_rdma "rdma none" "$(row error_queue)"
check_eq trunc_stays_on_rdma "rdma none" "$(row trunc)"
check_eq fastopen_connect_stays_on_tcp "tcp unsupported" \
	"$(row fastopen_connect)"
finish
