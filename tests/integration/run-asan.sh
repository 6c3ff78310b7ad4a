#!/bin/sh
# SPDX-License-Identifier: MIT
# roceshim-run for sanitizer builds: the AddressSanitizer runtime must be
# the first object loaded into a program that was not built with it, so it
# is preloaded ahead of libroceshim.so (roceshim-run appends after it).
# Leak checking is off: the programs under test (python, iperf3) are not
# ours and leak at exit by design.
LD_PRELOAD="$SANITIZER_LIBASAN${LD_PRELOAD:+ $LD_PRELOAD}"
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LD_PRELOAD ASAN_OPTIONS
exec "$ROCESHIM_REAL_RUN" "$@"
