#!/bin/bash
# SPDX-License-Identifier: MIT
#
# On a host with an RDMA device, the first connection that the rules admit
# loads libibverbs and librdmacm: on the main thread, on a thread while
# another waits in epoll_wait, or in a fork child (whose parent stays
# without them).  With the RDMA path off, or the address excluded, nothing
# is loaded.  When the libraries cannot be loaded (missing, or without the
# functions roceshim needs), the connections stay on TCP with the reason
# no_rdma_libs, their bytes are exact, a refused connect is still
# ECONNREFUSED, and only a library without the functions is a warning.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
probe="$top_srcdir/tests/integration/lazy_probe.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-lazy.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
export PROBE_ADDR=$ROCESHIM_FABRIC_ADDR_B

probe() {
	"$ROCESHIM_RUN" "$PYTHON" "$probe" "$@"
}

check_eq a_socket_without_connect_loads_nothing "socket mapped=0 shm=0" \
	"$(probe socket)"
check_eq first_connection_loads_the_stack "connect mapped=2 shm=1" \
	"$(probe connect "$ROCESHIM_STAT" "$tmp/rdma.json")"
check first_connection_is_on_rdma "$PYTHON" - "$tmp/rdma.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
conns = [c for c in s["connections"] if c["role"] != "listener"]
assert len(conns) == 2 and all(c["transport"] == "rdma" for c in conns), \
    conns
PY
check_eq stack_loads_on_a_thread_while_another_waits_in_epoll \
	"thread mapped=2 shm=1" "$(probe thread)"
check_eq stack_loads_in_a_fork_child_only \
	"child mapped=2 shm=1|fork mapped=0 shm=0" \
	"$(probe fork | paste -sd'|')"
check_eq rdma_path_off_loads_nothing "connect mapped=0 shm=1" \
	"$(ROCESHIM_RDMA=0 probe connect)"
check_eq excluded_address_loads_nothing "connect mapped=0 shm=1" \
	"$(ROCESHIM_EXCLUDE='*' probe connect)"

for bad in "LIBIBVERBS=$tmp/none/libibverbs.so.1" \
	"LIBRDMACM=$tmp/none/librdmacm.so.1" "LIBIBVERBS=libc.so.6"; do
	name=${bad%%=*}
	[ "${bad#*=}" = libc.so.6 ] && name="${name}_without_verbs"
	name=${name,,}
	out=$(env "ROCESHIM_$bad" "$ROCESHIM_RUN" "$PYTHON" "$probe" connect \
		"$ROCESHIM_STAT" "$tmp/$name.json" 2>"$tmp/$name.err")
	check_eq "unusable_${name}_keeps_the_bytes" connect "${out%% *}"
	check "unusable_${name}_is_tcp_no_rdma_libs" \
		"$PYTHON" - "$tmp/$name.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
conns = [c for c in s["connections"] if c["role"] != "listener"]
assert len(conns) == 2, conns
for c in conns:
    assert c["transport"] == "tcp" and c["fallback"] == "no_rdma_libs", c
assert s["global"]["fallbacks"]["no_rdma_libs"] == 2, s["global"]
PY
done
check missing_library_is_no_warning \
	test ! -s "$tmp/libibverbs.err" -a ! -s "$tmp/librdmacm.err"
check_eq library_without_verbs_is_one_warning 1 \
	"$(grep -c 'has no ibv_' "$tmp/libibverbs_without_verbs.err")"
check_eq refused_connect_without_libraries_is_econnrefused \
	"refused: ECONNREFUSED" \
	"$(ROCESHIM_LIBIBVERBS=/nonexistent probe refused | sed -n 1p)"

finish
