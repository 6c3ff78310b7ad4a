#!/bin/bash
# SPDX-License-Identifier: MIT
#
# OpenSSL with its KTLS option (tests/fabric/ktls.py): once the handshake
# is done it sets TCP_ULP "tls" and hands the kernel its plaintext, which
# the kernel's TLS layer frames and encrypts from there on.  Kernel TCP
# (ROCESHIM_RDMA=0) is the specification: every echo comes back and the
# kernel encrypted.  With RDMA on (default settings) an upgraded
# connection moves to its kernel socket before the option takes effect
# (downgrade "sockopt"), so the same holds.  Before, it stayed on RDMA:
# the handshake broke (DATA_BETWEEN_CCS_AND_FINISHED), and what OpenSSL
# handed the kernel would have crossed RDMA unencrypted.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-ktls.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

modprobe tls 2>/dev/null
if ! command -v openssl >/dev/null || [ ! -e /proc/net/tls_stat ]; then
	echo "SKIP: no openssl command, or no kernel TLS in this guest"
	exit 77
fi
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=roceshim -days 1 \
	-keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null ||
	{ echo "FAIL: openssl req"; exit 1; }
cat >"$tmp/ktls.cnf" <<'CNF'
openssl_conf = default_conf
[default_conf]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
Options = KTLS
CNF
export OPENSSL_CONF=$tmp/ktls.cnf

for way in tcp rdma; do
	run_way "$way" "$PYTHON" "$top_srcdir/tests/fabric/ktls.py" \
		"$ROCESHIM_FABRIC_ADDR_A" "$tmp/cert.pem" "$tmp/key.pem"
done
check_eq tcp_runs "rc 0" "$(grep '^rc' "$tmp/tcp")"
check_eq tcp_echoes_come_back "echoes 50 of 50" "$(grep '^echoes' "$tmp/tcp")"
check_eq tcp_kernel_encrypts "kernel encrypted: True" \
	"$(grep '^kernel' "$tmp/tcp")"
check_eq same_as_tcp "$(grep -v '^row ' "$tmp/tcp")" \
	"$(grep -v '^row ' "$tmp/rdma")"
check_eq client_moves_to_tcp "tcp none moved:sockopt" \
	"$(sed -n 's/^row client //p' "$tmp/rdma")"
finish
