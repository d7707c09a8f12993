#!/bin/bash
# make bench: every benchmark, each against its peer measured in the same
# run (ssh for connections, rsync for sync, an rsync+ssh script for train).
# Benchmarks print tables; they are measurements, not pass/fail tests.
#   tests/bench/run.sh [BUILD_DIR] [NAME...]   (NAME: connect sync watch logs pull queue pool kernels memory big)
# BENCH_BIG=1 adds bench_big.sh (2 GiB files, 100k-file trees: slow) to
# the default set, a 20 GiB sparse pull to bench_pull.sh and 1M files to
# bench_memory.sh; BENCH_HUGE=1
# with it adds a 20 GiB sparse file to bench_big.sh.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
shift || true
export GPURUN_BUILD=$BUILD
# The delay proxy and other helpers live in the test build.
make -s -C "$TOP" O="$BUILD" unit-bins >/dev/null || exit 1
names=${*:-connect sync watch logs pull queue pool kernels memory${BENCH_BIG:+ big}}
rc=0
for n in $names; do
	b=$TOP/tests/bench/bench_$n.sh
	if [ ! -f "$b" ]; then
		echo "bench $n: not written yet ($b)"
		continue
	fi
	echo "== bench $n"
	bash "$b" || rc=1
done
exit $rc
