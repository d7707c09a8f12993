#!/bin/bash
# gpurun's main job on a machine with a GPU, the host being that machine
# ([remote] host = local): the demo (init, sync, build with nvcc, train on
# CUDA, stream, pull), then a long GPU job started detached and stopped,
# with nvidia-smi asked before and after. Run by kernels/gpu_check.sh when
# GPURUN is set; it can run alone too. Without a GPU the checks that need
# one print "skipped: <why>" (so it can be rehearsed anywhere).
#   tests/gpu_e2e.sh GPURUN_BINARY RESULTS_DIR
# Writes RESULTS_DIR/e2e.log, e2e_ckpt.bin (the checkpoint the job wrote,
# pulled into runs/<job>/) and prints one "e2e: <check> ok|FAIL|skipped"
# line per check ("skipped: <why>" for a skip). Exit status: the number of failed checks.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
GPURUN=${1:?usage: tests/gpu_e2e.sh GPURUN_BINARY RESULTS_DIR}
RES=${2:?usage: tests/gpu_e2e.sh GPURUN_BINARY RESULTS_DIR}
case $GPURUN in /*) ;; *) GPURUN=$PWD/$GPURUN ;; esac
mkdir -p "$RES" && RES=$(cd "$RES" && pwd)
LOG=$RES/e2e.log
fails=0
result() { # CHECK ok|FAIL|skipped [why]
	if [ "$2" = skipped ]; then echo "e2e: $1 skipped: ${3:-no reason given}"; else echo "e2e: $1 $2${3:+ ($3)}"; fi
	[ "$2" = FAIL ] && fails=$((fails + 1))
	return 0
}
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi
# PIDs of processes on the GPU (compute apps), one per line.
gpu_pids() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' '; }

# 1. The demo on the local transport, its folder kept for what follows.
DEMO_TRANSPORT=local DEMO_KEEP=1 NO_COLOR=1 timeout -k 5 240 \
	"$TOP/tests/demo.sh" "$(dirname "$GPURUN")" >"$LOG" 2>&1
rc=$?
DEMO=$(sed -n 's/^demo: kept //p' "$LOG" | tail -n 1)
if [ $rc = 0 ]; then result demo ok; else result demo FAIL "tests/demo.sh exited $rc"; fi
grep -E '^(model |step 400/|held-out|cuda graph)' "$LOG" | sed 's/^/e2e:   /'
if [ $have_gpu = 1 ]; then
	if grep -q '| device cuda' "$LOG"; then result log_says_device_cuda ok
	else result log_says_device_cuda FAIL "no '| device cuda' in the job's log"; fi
else
	result log_says_device_cuda skipped "no GPU here"
fi
if [ -n "$DEMO" ] && [ -d "$DEMO/project/runs" ]; then
	ck=$(ls -t "$DEMO"/project/runs/*/ckpt.bin 2>/dev/null | head -n 1)
	if [ -n "$ck" ]; then cp "$ck" "$RES/e2e_ckpt.bin" && result ckpt_pulled ok
	else result ckpt_pulled FAIL "no runs/*/ckpt.bin"; fi
else
	result ckpt_pulled FAIL "the demo's folder is missing"
fi

# 2. A long job, detached, then gpurun stop: nothing of it may be left in
# the process table or, with a GPU, on it (nvidia-smi's compute apps).
if [ -z "$DEMO" ] || [ ! -d "$DEMO/project" ]; then
	result stop_frees_gpu FAIL "no demo project to start a job in"
else
	(
	export HOME=$DEMO/gpu-home
	cd "$DEMO/project" || exit 1
	dev=cpu
	[ $have_gpu = 1 ] && dev=cuda
	pat="train --synthetic 20000 --steps 100000000 --device $dev"
	before=$(gpu_pids | sort)
	echo "== stop: GPU processes before: ${before:-none}"
	timeout -k 5 60 "$GPURUN" train -d --name long -- kernels/train --synthetic 20000 \
		--steps 100000000 --device $dev --log-every 20000 --out out
	echo "train -d exited $?"
	procs='' on=''
	for _ in $(seq 1 120); do  # the job builds first (nvcc): up to 60 s
		procs=$(pgrep -f -- "$pat" | tr '\n' ' ')
		on=$(comm -13 <(echo "$before") <(gpu_pids | sort) | grep . | tr '\n' ' ')
		[ -n "$procs" ] && { [ $have_gpu = 0 ] || [ -n "$on" ]; } && break
		sleep 0.5
	done
	echo "job processes: ${procs:-none}; on the GPU: ${on:-none}"
	[ $have_gpu = 1 ] && nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
	timeout -k 5 60 "$GPURUN" status long
	[ -n "$procs" ] || { echo "stop: the job's trainer never started"; exit 2; }
	[ $have_gpu = 0 ] || [ -n "$on" ] || { echo "stop: the job never showed on the GPU"; exit 2; }
	start=$(date +%s%N)
	timeout -k 5 60 "$GPURUN" stop long
	src=$?
	echo "gpurun stop exited $src after $(( ($(date +%s%N) - start) / 1000000 )) ms"
	left='' alive=''
	for _ in $(seq 1 20); do
		left=$(comm -13 <(echo "$before") <(gpu_pids | sort) | grep . | tr '\n' ' ')
		alive=$(pgrep -f -- "$pat" | tr '\n' ' ')
		[ -z "$left" ] && [ -z "$alive" ] && break
		sleep 0.5
	done
	echo "GPU processes left: ${left:-none}; job processes alive: ${alive:-none}"
	[ $have_gpu = 1 ] && nvidia-smi --query-compute-apps=pid,process_name --format=csv 2>&1
	timeout -k 5 60 "$GPURUN" status long
	[ $src = 0 ] && [ -z "$left" ] && [ -z "$alive" ]
	) >>"$LOG" 2>&1
	case $? in
	0) result stop_frees_gpu ok "$([ $have_gpu = 1 ] && echo "nvidia-smi: none left" || echo "no GPU here: processes only")" ;;
	2) result stop_frees_gpu FAIL "the job did not start; see e2e.log" ;;
	*) result stop_frees_gpu FAIL "see e2e.log" ;;
	esac
	sed -n '/^== stop:/,$p' "$LOG" | grep -E 'processes|exited' | sed 's/^/e2e:   /'
fi
if [ -n "$DEMO" ] && [ "${KEEP_DEMO:-0}" != 1 ]; then rm -rf "$DEMO"; fi
exit $fails
