#!/bin/sh
# The GPU half of the kernels/ checks, for a machine with an NVIDIA GPU and
# nvcc: builds with CUDA, runs every test with the GPU cases required (a
# missing GPU is a failure here, not a skip), trains on the GPU, and runs
# the C benchmark and, when PyTorch is importable, bench/bench_torch.py.
# usage: sh kernels/gpu_check.sh        (or: make -C kernels gpu-test)
# env:   SKIP_BENCH=1 to stop after the tests.
set -u
cd "$(dirname "$0")" || exit 1
status=0

echo "== device"
nvidia-smi -L 2>/dev/null || echo "(nvidia-smi not available)"
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"

echo "== build"
make >/dev/null || exit 1
if ! ./train --version | grep -q 'cuda yes'; then
	echo "gpu_check: ./train was built without CUDA (is nvcc on PATH?)" >&2
	exit 1
fi
make build/cuda/test_kernels >/dev/null || exit 1

echo "== CUDA kernels vs the CPU reference (every case must pass, none skip)"
KERNELS_REQUIRE_GPU=1 ./build/cuda/test_kernels >build/gpu_check.out 2>build/gpu_check.err || status=1
cat build/gpu_check.out
grep -A12 '^# gpu_' build/gpu_check.err | grep -v '^--$'
if grep -q '^skip - gpu_' build/gpu_check.out; then
	echo "gpu_check: GPU cases were skipped" >&2
	status=1
fi
[ "$status" = 0 ] || echo "gpu_check: failures; details in $(pwd)/build/gpu_check.err" >&2

echo "== training on the GPU"
./train --synthetic 20000 --device cuda --hidden 1024,1024 --batch 256 --steps 2000 \
	--lr 1e-3 --log-every 500 --out build/gpu_check_run || status=1

if [ "${SKIP_BENCH:-0}" != 1 ]; then
	echo "== benchmark"
	if python3 -c 'import torch' 2>/dev/null; then
		python3 bench/bench_torch.py || status=1
		python3 bench/bench_torch.py --tf32 --modes eager || status=1
	else
		echo "(PyTorch not importable: C side only)"
		./train --bench --device cuda || status=1
	fi
fi

[ "$status" = 0 ] && echo "gpu_check: all passed"
exit $status
