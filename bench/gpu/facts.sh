#!/bin/bash
# What a GPU machine offers roceshim: the GPU, the RDMA stack, the CUDA
# driver's answers about memory (cuda_probe.c).  Run there by hand.
cd "$(dirname "$0")"
echo "== date: $(date -u +%FT%TZ) kernel: $(uname -r)"
nvidia-smi -L 2>&1 | head -2
nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1
echo "== RDMA"
ls /sys/class/infiniband 2>&1
command -v ibv_devices || echo "no ibv_devices"
ldconfig -p | grep -E 'libibverbs|librdmacm|libcuda.so|libcudart' | head
if command -v modprobe >/dev/null; then
	modprobe rdma_rxe && echo "rdma_rxe loaded" || echo "rdma_rxe: no"
else
	echo "no modprobe"
fi
ls /lib/modules/"$(uname -r)" 2>&1 | head -3
echo "== toolchain"
gcc --version 2>&1 | head -1
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())'
echo "== cuda_probe"
gcc -O2 -Wall -o /tmp/cuda_probe cuda_probe.c -ldl -lpthread && /tmp/cuda_probe
