#!/bin/bash
# SPDX-License-Identifier: MIT
#
# make install puts the library, the tools, the public header, the man
# pages and the pkg-config file where they belong, and the installed
# roceshim-run preloads the installed library.

set -u

dest=$(mktemp -d "${TMPDIR:-/tmp}/test-install.XXXXXX") || exit 1
trap 'rm -rf "$dest"' EXIT

make -s -C "$top_builddir" install DESTDIR="$dest" >/dev/null || {
	echo "FAIL: make install"
	exit 1
}
prefix=$(sed -n 's/^prefix=//p' "$top_builddir/roceshim.pc")
libdir=$(sed -n 's/^libdir=//p' "$top_builddir/roceshim.pc")
libdir=${libdir//\$\{exec_prefix\}/$prefix}

passes=0
failures=0
expect() {
	if [ -e "$dest$1" ]; then
		echo "ok installed $1"
		passes=$((passes + 1))
	else
		echo "FAIL missing $1"
		failures=$((failures + 1))
	fi
}

expect "$libdir/libroceshim.so"
expect "$prefix/bin/roceshim-run"
expect "$prefix/bin/roceshim-stat"
expect "$prefix/include/roceshim/stats.h"
expect "$libdir/pkgconfig/roceshim.pc"
expect "$prefix/share/man/man7/roceshim.7"
expect "$prefix/share/man/man1/roceshim-run.1"
expect "$prefix/share/man/man1/roceshim-stat.1"

if [ -e "$dest$libdir/libroceshim.la" ]; then
	echo "FAIL libtool archive installed"
	failures=$((failures + 1))
fi
if grep -q "lib=\"\${ROCESHIM_LIB:-$libdir/libroceshim.so}\"" \
	"$dest$prefix/bin/roceshim-run"; then
	echo "ok roceshim-run points at $libdir/libroceshim.so"
	passes=$((passes + 1))
else
	echo "FAIL roceshim-run does not point at the installed library"
	failures=$((failures + 1))
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
