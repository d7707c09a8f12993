#!/bin/sh
# End-to-end tests of kernels/train through its command line: flags and
# exit codes, the progress lines and metrics.csv, bad data files, NaN,
# checkpoints and --resume, the CPU fallback, --bench, and that the CUDA
# sources compile. One "ok - / not ok - / skip - NAME" line per case; the
# scratch folder is kept when a case fails.
# usage: sh tests/test_cli.sh PATH/TO/train   (env: NVCC, USE_CUDA, MAKE)

TRAIN=$1
[ -x "$TRAIN" ] || { echo "not ok - cli_binary_exists"; exit 1; }
case $TRAIN in /*) ;; *) TRAIN=$(pwd)/$TRAIN ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/kernels-cli-XXXXXX") || exit 1
failed=0
export LC_ALL=C

ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1"; failed=$((failed + 1)); }
skip() { echo "skip - $1 (skipped: $2)"; }
# check NAME COMMAND...: the case passes when the command succeeds.
check() {
	name=$1
	shift
	echo "# $name" >&2
	if "$@" >"$T/$name.log" 2>&1; then ok "$name"; else
		sed 's/^/  /' "$T/$name.log" >&2
		not_ok "$name"
	fi
}
# expect_rc RC STDERR_PATTERN ARGS...: train exits RC with the pattern on stderr.
expect_rc() {
	want=$1 pat=$2
	shift 2
	"$TRAIN" "$@" >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" != "$want" ]; then
		echo "train $*: exit $rc, expected $want; stderr:"; cat "$T/err"; return 1
	fi
	grep -q -- "$pat" "$T/err" || { echo "stderr lacks '$pat':"; cat "$T/err"; return 1; }
	echo "train $*: exit $rc: $(head -1 "$T/err")"
}
# A little-endian-free IDX writer: bytes given as decimal numbers.
bytes() { awk 'BEGIN { for (i = 1; i < ARGC; i++) printf "%c", ARGV[i] + 0 }' "$@"; }
# idx_images FILE COUNT ROWS COLS [PAYLOAD_BYTES]: pixels (i * 37) % 256.
idx_images() {
	n=${5:-$(($2 * $3 * $4))}
	{ bytes 0 0 8 3; be32 "$2"; be32 "$3"; be32 "$4"
	  awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "%c", (i * 37) % 256 }'; } >"$1"
}
# idx_labels FILE COUNT CLASSES [BAD_INDEX]: labels i % CLASSES (CLASSES at BAD_INDEX).
idx_labels() {
	{ bytes 0 0 8 1; be32 "$2"
	  awk -v n="$2" -v k="$3" -v bad="${4:--1}" \
		'BEGIN { for (i = 0; i < n; i++) printf "%c", (i == bad ? k : i % k) }'; } >"$1"
}
be32() { bytes $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }

SYN="--synthetic 2000 --hidden 32,32 --batch 32 --lr 3e-3"

t_help() {
	"$TRAIN" --help >"$T/help" && grep -q '^usage: train' "$T/help" && grep -q -- '--resume' "$T/help"
}

t_usage_errors() {
	expect_rc 2 "unknown option '--bogus'" --bogus 1 && \
	expect_rc 2 "is not an integer" $SYN --steps abc && \
	expect_rc 2 "out of range" $SYN --steps -5 && \
	expect_rc 2 "not auto, cpu or cuda" $SYN --device gpu && \
	expect_rc 2 "needs a value" $SYN --lr && \
	expect_rc 2 "hidden: 0 is out of range" $SYN --hidden 0 && \
	expect_rc 2 "no data" --steps 10 && \
	expect_rc 2 "one data source" $SYN --data /nonexistent && \
	expect_rc 2 "larger than the training set" --synthetic 100 --batch 500 --out "$T/u"
}

t_progress_and_metrics() {
	"$TRAIN" $SYN --steps 300 --log-every 50 --eval-every 100 --device cpu --out "$T/p" \
		>"$T/p.out" 2>"$T/p.err" || return 1
	cat "$T/p.out"
	n=$(grep -c -E '^step [0-9]+/300 \| loss [0-9.]+ \| acc [0-9.]+ \| [0-9]+ samples/s \| [0-9.]+ ms/step' "$T/p.out")
	[ "$n" = 6 ] || { echo "expected 6 progress lines, got $n"; return 1; }
	grep -q -E '^step 100/300 .*\| test_acc [0-9.]+$' "$T/p.out" || return 1
	grep -q -E '^held-out accuracy [0-9.]+ \([0-9]+/400\)' "$T/p.out" || return 1
	head -1 "$T/p/metrics.csv" | grep -qx 'step,loss,acc,samples_per_s,ms_per_step,test_loss,test_acc' || return 1
	[ "$(wc -l <"$T/p/metrics.csv")" = 7 ] || { echo "metrics.csv:"; cat "$T/p/metrics.csv"; return 1; }
	[ -s "$T/p/ckpt.bin" ]
}

t_bad_data() {
	idx_images "$T/img" 10 4 4 && idx_labels "$T/lab" 10 10 || return 1
	"$TRAIN" --train-images "$T/img" --train-labels "$T/lab" --hidden 8 --batch 4 --steps 5 \
		--out "$T/ok" >/dev/null 2>&1 || { echo "valid IDX files rejected"; return 1; }
	{ bytes 0 0 8 2; be32 10; be32 4; be32 4; } >"$T/badmagic"
	expect_rc 1 "badmagic': bad magic" --train-images "$T/badmagic" --train-labels "$T/lab" || return 1
	idx_images "$T/trunc" 10 4 4 150
	expect_rc 1 "trunc': truncated" --train-images "$T/trunc" --train-labels "$T/lab" || return 1
	idx_images "$T/zero" 10 0 4 0
	expect_rc 1 "zero': bad dimensions" --train-images "$T/zero" --train-labels "$T/lab" || return 1
	idx_labels "$T/lab9" 9 10
	expect_rc 1 "count mismatch" --train-images "$T/img" --train-labels "$T/lab9" || return 1
	idx_labels "$T/labbad" 10 10 3
	expect_rc 1 "label 10 at index 3 is out of range" --train-images "$T/img" \
		--train-labels "$T/labbad" || return 1
	expect_rc 1 "cannot open '$T/missing'" --train-images "$T/missing" --train-labels "$T/lab" || return 1
	mkdir -p "$T/mnist" && idx_images "$T/mnist/train-images-idx3-ubyte" 10 4 4 150 && \
		idx_labels "$T/mnist/train-labels-idx1-ubyte" 10 10 && \
	expect_rc 1 "train-images-idx3-ubyte': truncated" --data "$T/mnist"
}

t_idx_with_test_set() {
	idx_images "$T/ti" 64 3 3 && idx_labels "$T/tl" 64 4 && idx_images "$T/vi" 16 3 3 && \
		idx_labels "$T/vl" 16 4 || return 1
	"$TRAIN" --train-images "$T/ti" --train-labels "$T/tl" --test-images "$T/vi" \
		--test-labels "$T/vl" --classes 4 --hidden 8 --batch 8 --steps 20 --device cpu \
		--out "$T/idx" >"$T/idx.out" 2>&1 || { cat "$T/idx.out"; return 1; }
	grep -q 'model 9-8-4 .* train 64 | test 16' "$T/idx.out" && grep -q '(.*/16)' "$T/idx.out" || return 1
	# The same files laid out as an MNIST folder for --data.
	mkdir -p "$T/dd" && cp "$T/ti" "$T/dd/train-images-idx3-ubyte" && \
		cp "$T/tl" "$T/dd/train-labels-idx1-ubyte" && cp "$T/vi" "$T/dd/t10k-images-idx3-ubyte" && \
		cp "$T/vl" "$T/dd/t10k-labels-idx1-ubyte" || return 1
	"$TRAIN" --data "$T/dd" --classes 4 --hidden 8 --batch 8 --steps 20 --device cpu \
		--out "$T/dd/out" >"$T/dd.out" 2>&1 || { cat "$T/dd.out"; return 1; }
	grep -q 'train 64 | test 16' "$T/dd.out" && cmp "$T/idx/ckpt.bin" "$T/dd/out/ckpt.bin"
}

t_nan_exits_3() {
	expect_rc 3 "loss is \(nan\|inf\)" $SYN --steps 100 --lr 1e30 --device cpu --out "$T/nan" && \
	[ ! -e "$T/nan/ckpt.bin" ]
}

t_resume_bit_identical() {
	"$TRAIN" $SYN --steps 200 --device cpu --out "$T/full" >/dev/null 2>&1 && \
	"$TRAIN" $SYN --steps 100 --device cpu --out "$T/half" >/dev/null 2>&1 && \
	"$TRAIN" --synthetic 2000 --steps 200 --device cpu --resume "$T/half/ckpt.bin" \
		--out "$T/half" >"$T/res.out" 2>&1 || { cat "$T/res.out"; return 1; }
	grep -q 'steps 100/200' "$T/res.out" || return 1
	cmp "$T/full/ckpt.bin" "$T/half/ckpt.bin" && echo "checkpoints identical" && \
	"$TRAIN" $SYN --steps 200 --device cpu --out "$T/again" >/dev/null 2>&1 && \
	cmp "$T/full/ckpt.bin" "$T/again/ckpt.bin" && \
	"$TRAIN" $SYN --steps 200 --seed 2 --device cpu --out "$T/other" >/dev/null 2>&1 && \
	! cmp -s "$T/full/ckpt.bin" "$T/other/ckpt.bin"
}

t_resume_metrics_keep_earlier_rows() {
	"$TRAIN" $SYN --steps 100 --log-every 50 --device cpu --out "$T/m" >/dev/null 2>&1 && \
	cp "$T/m/ckpt.bin" "$T/ck100" && \
	"$TRAIN" $SYN --steps 200 --log-every 50 --device cpu --resume "$T/ck100" --out "$T/m" \
		>/dev/null 2>&1 && \
	"$TRAIN" --synthetic 2000 --steps 200 --log-every 50 --device cpu --resume "$T/ck100" \
		--out "$T/m" >/dev/null 2>&1 || return 1
	cat "$T/m/metrics.csv"
	[ "$(cut -d, -f1 "$T/m/metrics.csv" | tr '\n' ' ')" = "step 50 100 150 200 " ]
}

t_resume_refuses_conflicts() {
	"$TRAIN" $SYN --steps 50 --device cpu --out "$T/c" >/dev/null 2>&1 || return 1
	expect_rc 2 "--batch 64 conflicts with checkpoint" --synthetic 2000 --batch 64 --steps 100 \
		--resume "$T/c/ckpt.bin" --out "$T/c2" || return 1
	expect_rc 2 "--hidden gives the model 10-16-8" --synthetic 2000 --hidden 16 --steps 100 \
		--resume "$T/c/ckpt.bin" --out "$T/c2" || return 1
	expect_rc 1 "trained on different data" --synthetic 2000 --data-seed 5 --steps 100 \
		--resume "$T/c/ckpt.bin" --out "$T/c2" || return 1
	expect_rc 2 "beyond --steps 20" --synthetic 2000 --steps 20 --resume "$T/c/ckpt.bin" \
		--out "$T/c2" || return 1
	cp "$T/c/ckpt.bin" "$T/corrupt" && printf 'X' | dd of="$T/corrupt" bs=1 seek=300 \
		conv=notrunc 2>/dev/null && \
	expect_rc 1 "checksum mismatch" --synthetic 2000 --steps 100 --resume "$T/corrupt" \
		--out "$T/c2"
}

t_device_auto_falls_back() {
	"$TRAIN" --synthetic 500 --hidden 8 --steps 5 --out "$T/auto" >"$T/auto.out" 2>"$T/auto.err" || return 1
	cat "$T/auto.out" "$T/auto.err"
	if grep -q 'device cuda' "$T/auto.out"; then return 0; fi
	grep -q 'device cpu' "$T/auto.out" && [ "$(grep -c 'note:.*training on the cpu' "$T/auto.err")" = 1 ]
}

t_device_cuda_without_gpu() {
	if "$TRAIN" --device cuda --synthetic 500 --hidden 8 --steps 5 --out "$T/cu" >"$T/cu.out" 2>&1; then
		echo "a GPU is present"; return 0
	fi
	expect_rc 4 "^train: --device cuda: " --device cuda --synthetic 500 --steps 5 --out "$T/cu"
}

t_bench_runs_on_cpu() {
	"$TRAIN" --bench --device cpu --hidden 64 --bench-batches 64,256 --bench-steps 2 >"$T/b.out" || return 1
	cat "$T/b.out"
	[ "$(grep -c -E '^bench \| device cpu \| model 784-64-10 \| batch (64|256) \| [0-9]+ samples/s \| [0-9.]+ ms/step' "$T/b.out")" = 2 ]
}

# OpenMP: the same checkpoint bytes on 1, 2 and 3 threads (a model wide
# enough that the matmuls, bias ops and AdamW all run on the team).
t_threads_bit_identical() {
	for n in 1 2 3; do
		OMP_NUM_THREADS=$n "$TRAIN" --synthetic 2000 --hidden 400,300 --batch 128 --steps 20 \
			--device cpu --out "$T/thr$n" >/dev/null 2>&1 || return 1
	done
	cmp "$T/thr1/ckpt.bin" "$T/thr2/ckpt.bin" && cmp "$T/thr1/ckpt.bin" "$T/thr3/ckpt.bin" &&
		echo "checkpoints identical on 1, 2 and 3 threads"
}

check cli_help t_help
check cli_usage_errors_exit_2 t_usage_errors
check cli_progress_lines_and_metrics t_progress_and_metrics
check cli_bad_data_exits_1 t_bad_data
check cli_idx_files_and_data_dir t_idx_with_test_set
check cli_nan_loss_exits_3 t_nan_exits_3
check cli_resume_bit_identical t_resume_bit_identical
check cli_resume_metrics_keep_earlier_rows t_resume_metrics_keep_earlier_rows
check cli_resume_refuses_conflicts t_resume_refuses_conflicts
check cli_device_auto_falls_back t_device_auto_falls_back
check cli_device_cuda_without_gpu_exits_4 t_device_cuda_without_gpu
check cli_bench_runs_on_cpu t_bench_runs_on_cpu
if "$TRAIN" --version | grep -q 'openmp yes'; then
	check cli_threads_bit_identical t_threads_bit_identical
else
	skip cli_threads_bit_identical "built without OpenMP (OPENMP=)"
fi

# The CUDA sources compile: proven by this build when it used nvcc, else
# compiled now when nvcc is around.
echo "# cuda_build_compiles" >&2
if [ "${USE_CUDA:-0}" = 1 ]; then
	if "$TRAIN" --version | grep -q 'cuda yes'; then ok cuda_build_compiles; else not_ok cuda_build_compiles; fi
elif [ -n "$NVCC" ]; then
	if ${MAKE:-make} -s cuda-compile >"$T/nvcc.log" 2>&1; then ok cuda_build_compiles; else
		sed 's/^/  /' "$T/nvcc.log" >&2
		not_ok cuda_build_compiles
	fi
else
	skip cuda_build_compiles "nvcc not found"
fi

if [ "$failed" = 0 ]; then rm -rf "$T"; else echo "scratch kept in $T" >&2; fi
[ "$failed" = 0 ]
