#!/bin/bash
# SPDX-License-Identifier: MIT
# The C sources are formatted by the repository's .clang-format.
set -u
command -v clang-format >/dev/null || {
	echo "SKIP: clang-format not installed"
	exit 77
}
cd "$top_srcdir" || exit 1
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find src include tools tests bench -name '*.[ch]')
if clang-format --dry-run --Werror $files; then
	echo "PASS: $(echo "$files" | wc -w) files formatted"
else
	echo "FAIL: run clang-format -i on the files above"
	exit 1
fi
