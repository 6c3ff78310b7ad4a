#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Sends from CUDA memory over RDMA (default settings), with the CUDA
# driver's test double (tests/cuda/cuda_double.h) saying which memory is
# whose: it proves nothing about real GPUs.  Pinned memory goes out of a
# registration made once, and made again once its allocation was freed and
# reallocated at the same address; device memory is refused with EFAULT,
# as kernel TCP refuses it without roceshim; managed memory is copied;
# before cuInit() every buffer is pageable.  tests/cuda/cuda_send.c checks
# each case's bytes and memory counters, one case a process.
set -u
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-cuda.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
cuda_send="$top_builddir/tests/cuda/cuda_send"
a=$ROCESHIM_FABRIC_ADDR_A
b=$ROCESHIM_FABRIC_ADDR_B

# verdict NAME CASE CMD...: CMD (cuda_send) must print "ok CASE", exit 0.
verdict() {
	local name=$1 case=$2 out rc
	shift 2
	out=$("$@")
	rc=$?
	check_eq "$name" "ok $case (exit 0)" "$out (exit $rc)"
}

for c in pinned_send_registers_once fork_child_sends_pinned_memory_intact \
	reallocated_range_registers_again \
	device_send_is_efault managed_send_is_copied \
	before_cuinit_everything_is_pageable; do
	verdict "$c" "$c" "$ROCESHIM_RUN" --debug --log-file "$tmp/$c.log" \
		"$cuda_send" --expect-rdma --bind "$b" "$a" "$c"
done
# The 8 blocking sends of the pinned case took the cache, its 8
# non-blocking ones were copied (ROCESHIM_PINNED_ZEROCOPY_KB=0); with the
# threshold set, the non-blocking ones take it too.
check_eq only_blocking_pinned_sends_are_zero_copy_by_default 8 \
	"$(grep -c 'pinned send of' "$tmp/pinned_send_registers_once.log")"
verdict nonblocking_pinned_send_registers_once pinned_send_registers_once \
	env ROCESHIM_PINNED_ZEROCOPY_KB=64 "$ROCESHIM_RUN" --debug \
	--log-file "$tmp/nonblocking.log" \
	"$cuda_send" --expect-rdma --bind "$b" "$a" pinned_send_registers_once
pinned_sends=$(grep -c 'pinned send of' "$tmp/nonblocking.log")
check nonblocking_pinned_sends_are_zero_copy_when_asked [ "$pinned_sends" -gt 8 ]
# Not even as a large pageable send would be: the debug log shows each
# registration of that zero-copy path.
check_eq managed_memory_is_never_registered 0 \
	"$(grep -c 'zero-copy send of' "$tmp/managed_send_is_copied.log")"
verdict device_send_is_efault_without_roceshim device_send_is_efault \
	"$cuda_send" --bind "$b" "$a" device_send_is_efault
finish
