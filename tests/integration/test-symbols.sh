#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The library's own code never calls a name the library exports: inside
# roceshim, socket calls go through `real` (real.h) to libc.  A core object
# that called write() or fcntl() by name would go through roceshim's own
# wrapper, which is at best a detour and at worst a recursion into the
# state it is changing.  Every undefined symbol of the core objects is
# checked against the dynamic symbols libroceshim.so defines.  And its
# thread-locals are initial-exec.

set -u

lib="$top_builddir/src/.libs/libroceshim.so"
core="$top_builddir/src/.libs/libroceshim_core.a"
for f in "$lib" "$core"; do
	[ -r "$f" ] || {
		echo "FAIL: $f not built"
		exit 1
	}
done
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
[ "$(echo "$exported" | wc -l)" -gt 40 ] || {
	echo "FAIL: $lib exports only: $exported"
	exit 1
}
bad=0
while read -r object symbol; do
	if grep -qx "$symbol" <<<"$exported"; then
		echo "FAIL: $object calls the exported $symbol(); use real.$symbol"
		bad=$((bad + 1))
	fi
done < <(nm -A -u "$core" 2>/dev/null |
	sed -n 's/^[^:]*:\([^:]*\.o\): *U \([A-Za-z_0-9]*\)$/\1 \2/p')
# Preloaded, the library's thread-locals are in the static TLS block:
# built initial-exec, no access to them goes through __tls_get_addr().
if nm -D --undefined-only "$lib" | grep -q ' __tls_get_addr'; then
	echo "FAIL: $lib reaches its thread-locals through __tls_get_addr()"
	bad=$((bad + 1))
fi
[ "$bad" -eq 0 ] || exit 1
echo "PASS: no core object calls one of the $(echo "$exported" |
	wc -l) exported names"
