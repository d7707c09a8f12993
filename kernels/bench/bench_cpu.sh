#!/bin/sh
# The CPU reference against numpy on the same MLP training step
# (784-1024-1024-10, forward + backward + AdamW, FP32): `train --bench
# --device cpu` at each OMP_NUM_THREADS given and bench/bench_numpy.py with
# single-threaded BLAS, in the same run, alternating which goes first each
# round. Prints samples/s per run, then per batch and thread count the
# median samples/s of each side, the ratio C / numpy (of the medians, with
# the range of the per-round ratios) and the peak RSS (/usr/bin/time).
#
#   sh bench/bench_cpu.sh                       # from kernels/, after make
#   make -C kernels bench-cpu                   # the same
#   sh bench/bench_cpu.sh -r 5 -b "64 4096" -t "1 2"
#   PYTHON=/path/to/venv/bin/python sh bench/bench_cpu.sh
#
# numpy: $PYTHON, else the first of python3 and /opt/gpurun-pytools/bin/python
# that imports it (pip install numpy into a venv and set PYTHON otherwise).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
train=${TRAIN:-$here/../train}
rounds=3
batches="64 4096"
threads="1 $(nproc 2>/dev/null || echo 1)"
while getopts r:b:t: opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	b) batches=$OPTARG ;;
	t) threads=$OPTARG ;;
	*) echo "usage: bench_cpu.sh [-r ROUNDS] [-b \"BATCHES\"] [-t \"THREADS\"]" >&2; exit 2 ;;
	esac
done
threads=$(echo "$threads" | tr ' ' '\n' | awk 'NF && !seen[$0]++' | tr '\n' ' ')

die() { echo "bench_cpu: $*" >&2; exit 1; }
[ -x "$train" ] || die "cannot run '$train'; hint: make -C kernels first"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (Debian package: time)"
if [ -z "${PYTHON:-}" ]; then
	for p in python3 /opt/gpurun-pytools/bin/python; do
		if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
	done
fi
[ -n "${PYTHON:-}" ] || die "no python with numpy; hint: python3 -m venv V && V/bin/pip install numpy, then PYTHON=V/bin/python"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_cpu.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# run NAME BATCH STEPS: one timed run; appends "name batch samples/s rss_kib"
# to $tmp/results and prints the run's line.
run() {
	name=$1 b=$2 steps=$3
	case $name in
	numpy)
		OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
			/usr/bin/time -f %M -o "$tmp/rss" "$PYTHON" "$here/bench_numpy.py" \
			--batches "$b" --steps "$steps" >"$tmp/out" ;;
	c*)
		OMP_NUM_THREADS=${name#c} /usr/bin/time -f %M -o "$tmp/rss" "$train" --bench \
			--device cpu --bench-batches "$b" --bench-steps "$steps" >"$tmp/out" ;;
	esac
	sps=$(sed -n 's/.*| \([0-9.]*\) samples\/s.*/\1/p' "$tmp/out")
	[ -n "$sps" ] || die "no samples/s from $name: $(cat "$tmp/out")"
	rss=$(tail -n 1 "$tmp/rss")
	echo "$name $b $sps $rss" >>"$tmp/results"
	printf '  %-6s batch %-5s %9s samples/s  peak RSS %6d MiB\n' "$name" "$b" "$sps" $((rss / 1024))
}

echo "train: $train ($("$train" --version))"
echo "numpy: $PYTHON ($("$PYTHON" -c 'import numpy; print(numpy.__version__)')), OPENBLAS_NUM_THREADS=1"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cpus; C threads: $threads"
: >"$tmp/results"
for b in $batches; do
	steps=$((6400 / b))
	[ "$steps" -ge 5 ] || steps=5
	r=1
	while [ "$r" -le "$rounds" ]; do
		echo "batch $b, round $r/$rounds ($steps steps per run):"
		# rotate the order so that no side always runs first
		order="numpy"
		for t in $threads; do order="$order c$t"; done
		i=1
		while [ "$i" -lt "$r" ]; do
			order="$(echo "$order" | cut -d' ' -f2-) $(echo "$order" | cut -d' ' -f1)"
			i=$((i + 1))
		done
		for name in $order; do run "$name" "$b" "$steps"; done
		r=$((r + 1))
	done
done

echo
echo "summary (median of $rounds rounds; ratio = C / numpy of the medians, [min, max] over rounds):"
printf '%-6s %-8s %14s %14s %7s %-15s %10s %10s\n' batch threads "C samples/s" "numpy" ratio "[per round]" "C RSS MiB" "np RSS MiB"
for b in $batches; do
	for t in $threads; do
		awk -v b="$b" -v c="c$t" -v t="$t" '
		function median(a, n,   i, j, x) {
			for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		$2 == b && $1 == c { nc++; cs[nc] = $3; if ($4 > crss) crss = $4 }
		$2 == b && $1 == "numpy" { nn++; ns[nn] = $3; if ($4 > nrss) nrss = $4 }
		END {
			lo = 1e300; hi = 0
			for (i = 1; i <= nc && i <= nn; i++) { q = cs[i] / ns[i]; if (q < lo) lo = q; if (q > hi) hi = q }
			mc = median(cs, nc); mn = median(ns, nn)
			printf "%-6s %-8s %14.0f %14.0f %6.2fx [%.2f, %.2f]    %10d %10d\n", b, t, mc, mn, mc / mn, lo, hi, crss / 1024, nrss / 1024
		}' "$tmp/results"
	done
done
