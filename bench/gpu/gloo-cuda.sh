#!/bin/bash
# A PyTorch Gloo job at world 2 with CUDA tensors under the preload, on a
# machine with a GPU: results against a plain run, the memory classes in
# the stats, and the job's time with and without roceshim (DEVICE=cpu:
# the same without a GPU).  Usage:
#   bench/gpu/gloo-cuda.sh LIBROCESHIM ROCESHIM_STAT
set -u
lib=$(readlink -f "$1")
export ROCESHIM_STAT=$(readlink -f "$2")
export ROCESHIM_RUN="env LD_PRELOAD=$lib"
export PYTHONUNBUFFERED=1
job=$(dirname "$0")/../../tests/integration/gloo_job.py
py=${PYTHON:-python3}
common=(--world 2 --device ${DEVICE:-cuda} --ops all_reduce,broadcast,all_gather
	--sizes 4K,1M,16M --iters 3 --timeout 240)
echo "== plain"
$py "$job" launch "${common[@]}" --digests-out /tmp/plain.digests
echo "== preloaded"
$py "$job" launch "${common[@]}" --preload --check-memory --show-stats \
	--digests-out /tmp/preload.digests
cmp /tmp/plain.digests /tmp/preload.digests && echo "digests: identical"
echo "== send of a CUDA tensor (Gloo passes the device pointer to writev)"
for mode in "" --preload; do
	$py "$job" launch --world 2 --device ${DEVICE:-cuda} --ops send_recv --sizes 1M \
		--iters 1 --timeout 60 $mode 2>&1 | grep -m2 -E "Bad address|ok in|FAILED"
done
echo "== bench: plain, preloaded, plain, preloaded"
for mode in "" --preload "" --preload; do
	echo "-- ${mode:-plain}"
	$py "$job" launch --world 2 --device ${DEVICE:-cuda} --ops all_reduce \
		--sizes 4K,1M,16M --iters ${ITERS:-30} --bench --timeout 240 $mode |
		grep '^bench'
done
