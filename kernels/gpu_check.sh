#!/bin/bash
# The GPU half of the kernels/ checks, for a machine with an NVIDIA GPU and
# nvcc, as one run that never stops at the first failure: each section has
# its own time limit, writes its log, and adds a line to the summary.
#   device     nvidia-smi, nvcc, PyTorch, compute-sanitizer, ncu
#   build      ./train and the tests with nvcc (sm_90)
#   tests      every CUDA-vs-CPU case (a missing GPU fails), the worst error
#              per op; the CLI tests on the CUDA build
#   train      the demo's training on CUDA; a CPU checkpoint (CPU_CKPT)
#              resumed on the GPU; a GPU checkpoint written for the CPU
#   sanitizer  compute-sanitizer memcheck on a short run, graph on and off
#   e2e        gpurun train on this machine (tests/gpu_e2e.sh; GPURUN=path)
#   bench      bench/bench_torch.py against PyTorch eager, both models
#              (784-1024-1024-10, 4096-4096-4096-10), FP32 and TF32
#   ncu        Nsight Compute on the C trainer's steps (the slowest kernels)
#   compile    the same against torch.compile (last: compiling is slow)
# usage: bash kernels/gpu_check.sh    (or: make -C kernels gpu-test)
# env:   OUT        results folder (default kernels/build/gpu_check): the
#                   summary, every log in logs.tar.gz, the bench JSON, the
#                   checkpoints; at most 8 files, 2 levels
#        SECTIONS   which to run (default all, in the order above)
#        BUDGET     seconds for the whole run (default 1800): a section
#                   starts only with its minimum left, and stops at its limit
#        GPURUN     a gpurun binary for the e2e section (skipped without)
#        CPU_CKPT   checkpoint of the demo's model written on the CPU at
#                   step 200 (the train section resumes it on the GPU)
#        COMPILE_MODES  torch modes of the compile section (default compile;
#                   compile-ro: mode=reduce-overhead, torch's CUDA graphs)
#        SKIP_BENCH=1  no bench, ncu or compile
# Exit status: 0 when every section passed.
set -u
cd "$(dirname "$0")" || exit 1
KDIR=$(pwd)
OUT=${OUT:-$KDIR/build/gpu_check}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
W=$KDIR/build/gpu_check_work
rm -rf "$W" && mkdir -p "$W/logs"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
T0=$(date +%s)
BUDGET=${BUDGET:-1800}
SECTIONS=${SECTIONS:-device build tests train sanitizer e2e bench ncu compile}
[ "${SKIP_BENCH:-0}" = 1 ] && SECTIONS=$(echo "$SECTIONS" | sed 's/bench//; s/ncu//; s/compile//')
NPROC=$(nproc 2>/dev/null || echo 4)
export PYTHONUNBUFFERED=1
status=0

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - ($(date +%s) - T0))); }
# Everything learned so far, packed after each section (a run killed at
# its limit still leaves what it had).
pack() { tar -czf "$OUT/logs.tar.gz" -C "$W" logs 2>/dev/null; }
# section NAME MIN_SECONDS LIMIT_SECONDS: whether to run it (and its log).
section_start() {
	local name=$1 min=$2 rem
	rem=$(left)
	case " $SECTIONS " in *" $name "*) ;; *) return 1 ;; esac
	if [ "$rem" -lt "$min" ]; then
		say "$name: skipped: ${rem}s of the budget left, it needs ${min}s"
		return 1
	fi
	SEC_T0=$(date +%s)
	SEC_LOG=$W/logs/$name.log
	echo "== $name ($(date -u +%T), ${rem}s left)"
	return 0
}
section_end() { # NAME RESULT [NOTE]
	local name=$1 res=$2
	say "$name: $res ($(($(date +%s) - SEC_T0))s)${3:+ - $3}"
	[ "$res" = ok ] || status=1
	pack
}
# run LIMIT CMD...: the command under a time limit, its output to the log.
run() {
	local lim=$1 r
	shift
	echo "\$ $*" >>"$SEC_LOG"
	timeout -k 5 "$lim" "$@" >>"$SEC_LOG" 2>&1
	r=$?
	[ $r = 124 ] && echo "(timed out after ${lim}s)" >>"$SEC_LOG"
	return $r
}
# A limit that fits the budget: min(want, budget left - 10).
lim() { local l; l=$(($(left) - 10)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

HAVE_CUDA_BUILD=0
HAVE_GPU=0

if section_start device 5; then
	{
		uname -a; nproc; date -u
		nvidia-smi; nvidia-smi -L
		nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version,compute_cap --format=csv
		command -v nvcc && nvcc --version
		python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
		command -v compute-sanitizer && compute-sanitizer --version | tail -1
		command -v ncu && ncu --version | tail -1
		command -v gcc && gcc --version | head -1
		echo "PATH=$PATH"; ls -d /usr/local/cuda* 2>&1
		ls -d /usr/local/cuda/lib64/libcublas* /usr/local/cuda/lib64/libcudart* 2>&1 | head
		ldconfig -p | grep -E 'cublas|libnvidia-ml' | head
		cat /etc/os-release 2>/dev/null | head -2; ldd --version | head -1
		grep -m1 'model name' /proc/cpuinfo; grep -m1 -o 'avx512[a-z]*' /proc/cpuinfo | head -1
		df -h /tmp . | tail -2; free -g | head -2
	} >"$SEC_LOG" 2>&1
	nvidia-smi -L >/dev/null 2>&1 && HAVE_GPU=1
	g=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
	if [ $HAVE_GPU = 1 ]; then section_end device ok "$g"; else section_end device FAIL "nvidia-smi sees no GPU"; fi
fi

if section_start build 20; then
	run "$(lim 240)" make -j"$NPROC" train build/cuda/test_kernels
	r=$?
	if [ $r != 0 ]; then
		# cuBLAS elsewhere than nvcc's own lib64 (a pip-installed toolkit):
		# find it and say so to the Makefile.
		cb=$(find /usr /opt -xdev -name 'libcublas.so*' 2>/dev/null | sort | head -n 1)
		if [ -n "$cb" ]; then
			d=$(dirname "$cb")
			echo "(retrying with cuBLAS from $d)" >>"$SEC_LOG"
			run "$(lim 240)" make -j"$NPROC" train build/cuda/test_kernels \
				NVCC_EXTRA="-I$d/../include" CUBLAS_LIB="-l:$(basename "$cb")" \
				NVLD_EXTRA="-L$d -Xlinker -rpath=$d"
			r=$?
		fi
	fi
	if [ $r = 0 ] && ./train --version 2>&1 | tee -a "$SEC_LOG" | grep -q 'cuda yes'; then
		HAVE_CUDA_BUILD=1
		section_end build ok "$(./train --version)"
	else
		section_end build FAIL "make exited $r or ./train has no CUDA (is nvcc on PATH?)"
	fi
fi

if section_start tests 20; then
	if [ $HAVE_CUDA_BUILD = 1 ]; then
		mkdir -p "$W/tests"
		KERNELS_REQUIRE_GPU=1 timeout -k 5 "$(lim 300)" ./build/cuda/test_kernels \
			>"$W/tests/out" 2>"$W/tests/err"
		r=$?
		cat "$W/tests/out" "$W/tests/err" >"$SEC_LOG"
		n_ok=$(grep -c '^ok' "$W/tests/out")
		n_bad=$(grep -c '^not ok' "$W/tests/out")
		n_skip=$(grep -c '^skip' "$W/tests/out")
		# The worst error of every compared quantity, GPU cases only.
		sed -n '/^# gpu_/,$p' "$W/tests/err" | grep -E 'worst|normwise|loss gpu|held-out|identical|graph' \
			| sed 's/^ */  /' >>"$SUMMARY"
		echo "--- test_cli.sh" >>"$SEC_LOG"
		USE_CUDA=1 NVCC=$(command -v nvcc) timeout -k 5 "$(lim 120)" sh tests/test_cli.sh ./build/cuda/train \
			>>"$SEC_LOG" 2>&1
		rc_cli=$?
		if [ $r = 0 ] && [ "$n_bad" = 0 ] && [ "$n_skip" = 0 ] && [ $rc_cli = 0 ]; then
			section_end tests ok "$n_ok cases; test_cli ok"
		else
			section_end tests FAIL "exit $r: $n_ok ok, $n_bad not ok, $n_skip skipped; test_cli exit $rc_cli: $(grep '^not ok' "$SEC_LOG" | tr '\n' ' ')"
		fi
	else
		section_end tests FAIL "no CUDA build"
	fi
fi

if section_start train 20; then
	# The demo's job ([train] command of gpurun init for kernels/).
	DEMO_ARGS="--synthetic 20000"
	ok=1 note=
	run "$(lim 120)" ./train $DEMO_ARGS --steps 400 --device cuda --out "$W/gpu400" || ok=0
	grep -E '\| device |held-out|cuda graph' "$SEC_LOG" | sed 's/^/  /' >>"$SUMMARY"
	grep -q '| device cuda' "$SEC_LOG" || { ok=0; note="log does not say device cuda"; }
	# A GPU checkpoint at step 200, for the CPU to resume (carried back).
	run "$(lim 60)" ./train $DEMO_ARGS --steps 200 --device cuda --out "$W/gpu200" || ok=0
	cp "$W/gpu200/ckpt.bin" "$OUT/gpu200_ckpt.bin" 2>/dev/null || ok=0
	# The same run on the CPU, here: the CPU path is the same bits anywhere.
	run "$(lim 120)" ./train $DEMO_ARGS --steps 400 --device cpu --out "$W/cpu400" || ok=0
	if [ -n "${CPU_CKPT:-}" ] && [ -f "$CPU_CKPT" ]; then
		run "$(lim 60)" ./train $DEMO_ARGS --steps 400 --device cuda --resume "$CPU_CKPT" \
			--out "$W/cpu2gpu" || ok=0
	else
		echo "(no CPU_CKPT: the CPU-to-GPU resume is not tried)" >>"$SEC_LOG"
		note="$note; no CPU_CKPT"
	fi
	grep -E '^\$|held-out' "$SEC_LOG" | sed 's/^/  /' >>"$SUMMARY"
	if [ $ok = 1 ]; then section_end train ok "$note"; else section_end train FAIL "$note"; fi
fi

if section_start sanitizer 30; then
	if command -v compute-sanitizer >/dev/null 2>&1 && [ $HAVE_CUDA_BUILD = 1 ]; then
		SARGS="--synthetic 2000 --device cuda --hidden 256,256 --batch 64 --steps 40 --log-every 20"
		run "$(lim 150)" compute-sanitizer --tool memcheck --error-exitcode 9 ./train $SARGS --out "$W/san1"
		r1=$?
		KERNELS_CUDA_GRAPH=0 run "$(lim 150)" compute-sanitizer --tool memcheck --error-exitcode 9 \
			./train $SARGS --out "$W/san2"
		r2=$?
		# Races in shared memory (the column sums) and barriers.
		KERNELS_CUDA_GRAPH=0 run "$(lim 150)" compute-sanitizer --tool racecheck --error-exitcode 9 \
			./train --synthetic 2000 --device cuda --hidden 256,256 --batch 300 --steps 3 \
			--log-every 3 --out "$W/san3"
		r3=$?
		KERNELS_CUDA_GRAPH=0 run "$(lim 150)" compute-sanitizer --tool synccheck --error-exitcode 9 \
			./train --synthetic 2000 --device cuda --hidden 256,256 --batch 300 --steps 3 \
			--log-every 3 --out "$W/san4"
		r4=$?
		grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|timed out' "$SEC_LOG" | sed 's/^/  /' >>"$SUMMARY"
		if [ $r1 = 0 ] && [ $r2 = 0 ] && [ $r3 = 0 ] && [ $r4 = 0 ]; then
			section_end sanitizer ok "memcheck clean (graph on and off), racecheck and synccheck clean"
		else
			section_end sanitizer FAIL "memcheck exit $r1 (graph) / $r2 (no graph), racecheck $r3, synccheck $r4"
		fi
	else
		section_end sanitizer FAIL "no compute-sanitizer or no CUDA build"
	fi
fi

if section_start e2e 60; then
	if [ -n "${GPURUN:-}" ] && [ -x "$GPURUN" ]; then
		timeout -k 5 "$(lim 300)" bash ../tests/gpu_e2e.sh "$GPURUN" "$W/e2e" >"$SEC_LOG" 2>&1
		r=$?
		cat "$W/e2e/e2e.log" >>"$SEC_LOG" 2>/dev/null
		grep '^e2e:' "$SEC_LOG" | sed 's/^/  /' >>"$SUMMARY"
		cp "$W/e2e/e2e_ckpt.bin" "$OUT/e2e_ckpt.bin" 2>/dev/null
		if [ $r = 0 ]; then section_end e2e ok; else section_end e2e FAIL "tests/gpu_e2e.sh exited $r"; fi
	else
		section_end e2e FAIL "GPURUN is not set to a gpurun binary"
	fi
fi

# bench_run NAME PRECISION MODE: bench_torch.py for both models.
MODELS=${BENCH_MODELS:-784-1024-1024-10,4096-4096-4096-10}
bench_run() {
	local f=
	[ "$2" = tf32 ] && f=--tf32
	if [ "$(left)" -le 40 ]; then
		echo "(no time left for $2 $3)" >>"$SEC_LOG"
		return 1
	fi
	run "$(lim 240)" python3 bench/bench_torch.py --models "$MODELS" --modes "$3" $f \
		--steps "${BENCH_STEPS:-300}" --json "$W/logs/bench_${2}_$3.json"
	local r=$?
	pack
	return $r
}
bench_summary() {
	grep -E '^(model|C \(|torch |C / |ceiling)|cuda graph|^\(no time' "$SEC_LOG" | grep -v '^  torch' \
		| sed 's/^/  /' >>"$SUMMARY"
}

if section_start bench 60; then
	if [ $HAVE_CUDA_BUILD = 1 ]; then
		ok=1
		# The ceilings as measured: an 8192^3 matrix product in FP32 and
		# TF32 through cuBLAS (torch.mm), median of 10 after warm-up.
		run 60 python3 -c '
import torch
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
for tf in (False, True):
    torch.backends.cuda.matmul.allow_tf32 = tf
    for _ in range(3): a @ b
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    print("ceiling %s: 8192^3 matmul %.1f TFLOP/s" % ("tf32" if tf else "fp32", 2 * 8192**3 / (ts[5] * 1e-3) * 1e-12))
x = torch.empty(2**30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): y.copy_(x)
e.record(); torch.cuda.synchronize()
print("ceiling copy: %.0f GB/s (read + write)" % (2 * 2**30 * 10 / (s.elapsed_time(e) * 1e-3) * 1e-9))
' || ok=0
		# The C trainer alone with the graph off: what the graph buys.
		KERNELS_CUDA_GRAPH=0 run "$(lim 60)" ./train --bench --device cuda --bench-batches 64,4096 || ok=0
		bench_run bench fp32 eager || ok=0
		bench_run bench tf32 eager || ok=0
		bench_summary
		if [ $ok = 1 ]; then section_end bench ok; else section_end bench FAIL "see logs/bench.log"; fi
	else
		section_end bench FAIL "no CUDA build"
	fi
fi

if section_start ncu 30; then
	if command -v ncu >/dev/null 2>&1 && [ $HAVE_CUDA_BUILD = 1 ]; then
		# A few steps of each size after warm-up; every kernel's duration and
		# its speed of light (compute and memory throughput of its peak).
		r=0
		for b in 64 4096; do
			run "$(lim 90)" ncu --clock-control none --launch-skip 200 --launch-count 25 \
				--section SpeedOfLight --section LaunchStats \
				./train --bench --device cuda --bench-batches $b --bench-steps 30 || r=$?
		done
		grep -E '^  [a-z_A-Z].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput' "$SEC_LOG" \
			| head -200 >"$W/logs/ncu_brief.txt"
		if [ $r = 0 ]; then section_end ncu ok; else section_end ncu FAIL "ncu exited $r"; fi
	else
		section_end ncu FAIL "no ncu or no CUDA build"
	fi
fi

if section_start compile 60; then
	if [ $HAVE_CUDA_BUILD = 1 ]; then
		ok=1
		for mode in ${COMPILE_MODES:-compile}; do
			bench_run compile fp32 "$mode" || ok=0
			bench_run compile tf32 "$mode" || ok=0
		done
		bench_summary
		if [ $ok = 1 ]; then section_end compile ok; else section_end compile FAIL "see logs/compile.log"; fi
	else
		section_end compile FAIL "no CUDA build"
	fi
fi

say "gpu_check: $( [ $status = 0 ] && echo 'all passed' || echo 'failures (see the lines above and logs.tar.gz)') in $(($(date +%s) - T0))s"
pack
exit $status
