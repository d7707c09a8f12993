#!/bin/bash
# Benchmark: the kernels' CPU reference against single-threaded numpy on
# the same MLP training step (kernels/bench/bench_cpu.sh: batch 64 and
# 4096, one thread and every core, samples/s, ratio, peak RSS).
#   tests/bench/bench_kernels.sh        (make bench calls it; ROUNDS=3)
TOP=$(cd "$(dirname "$0")/../.." && pwd)
# The CPU build's own binary: kernels/train stays what `make -C kernels` made.
make -s -C "$TOP/kernels" NO_CUDA=1 build/cpu/train >/dev/null || exit 1
TRAIN=$TOP/kernels/build/cpu/train exec sh "$TOP/kernels/bench/bench_cpu.sh" -r "${ROUNDS:-3}"
