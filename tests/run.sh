#!/bin/bash
# Run every test tier and print one closing line: "N passed, N failed, N skipped".
#   tests/run.sh [BUILD_DIR]      (default build-san: the ASan+UBSan build)
# Tiers: C unit tests, end-to-end shell tests (tests/t/), fuzz targets for a
# short budget, and the kernels' tests. Each prints "ok - ", "not ok - " and
# "skip - " lines; a binary that dies without them counts as a failure.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build-san}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
export GPURUN_BUILD=$BUILD
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:exitcode=99}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=98}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
LOG=$(mktemp -d /tmp/gpurun-tests.XXXXXX)
pass=0 fail=0 skip=0

# run_tier NAME CMD...: run, echo its output, count its case lines.
run_tier() {
	local name=$1 out=$LOG/$(echo "$1" | tr '/ ' '__').log rc
	shift
	# No tier may hang the run: a stuck one fails after TIER_TIMEOUT seconds.
	timeout -k 10 "${TIER_TIMEOUT:-900}" "$@" >"$out" 2>&1
	rc=$?
	[ "$rc" -eq 124 ] && echo "not ok - $name: timed out after ${TIER_TIMEOUT:-900}s" >>"$out"
	cat "$out"
	local p f s
	p=$(grep -c '^ok - ' "$out")
	f=$(grep -c '^not ok - ' "$out")
	s=$(grep -c '^skip - ' "$out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name: exited $rc without reporting a failing case" | tee -a "$out"
		f=1
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	# Each failing case with the last lines it printed (lib.sh puts them
	# after its verdict): a flake in CI is seen once, and what it said is
	# all there is to go on.
	awk 'function flush() { for (i = 0; i < nb; i++) print "  | " b[i]; nb = 0 }
	     /^(ok|not ok|skip) - /{ flush(); keep = /^not ok - /; if (keep) print; next }
	     keep { if (nb == 15) { for (i = 1; i < 15; i++) b[i - 1] = b[i]; nb = 14 } b[nb++] = $0 }
	     END { flush() }' "$out" |
		cut -c1-200 >>"$LOG/failed"
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_tier "unit/$(basename "$t")" "$t"
done

for t in "$TOP"/tests/t/t[0-9]*.sh; do
	[ -f "$t" ] || continue
	run_tier "e2e/$(basename "$t")" bash "$t"
done

for f in "$BUILD"/fuzz/fuzz_*; do
	[ -x "$f" ] || continue
	name=$(basename "$f")
	corpus=$TOP/tests/fuzz/corpus/${name#fuzz_}
	mkdir -p "$LOG/$name"
	[ -d "$corpus" ] && cp -r "$corpus"/. "$LOG/$name"/ 2>/dev/null
	if timeout -k 10 $((FUZZ_SECONDS * 3 + 60)) "$f" -timeout=20 -max_len=2048 -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=1024 -print_final_stats=1 "$LOG/$name" >"$LOG/$name.log" 2>&1; then
		echo "ok - fuzz/$name: ${FUZZ_SECONDS}s without a crash ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$LOG/$name.log" | grep -o '[0-9]*$' || echo '?') runs)"
		pass=$((pass + 1))
	else
		echo "not ok - fuzz/$name: crashed; see below" | tee -a "$LOG/failed"
		tail -n 30 "$LOG/$name.log"
		fail=$((fail + 1))
	fi
done

if [ -f "$TOP/kernels/Makefile" ]; then
	run_tier kernels make -s -C "$TOP/kernels" test SAN=1
fi

# The failing cases again, at the end, where a log's tail shows them.
if [ -s "$LOG/failed" ]; then
	echo "# the failing cases:"
	head -n 160 "$LOG/failed" | sed 's/^/#   /'
fi
rm -rf "$LOG"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
