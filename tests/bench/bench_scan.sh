#!/bin/bash
# Scan speed: gpurun's scan_tree against `git ls-files --others
# --exclude-standard` on the same synthetic tree (warm cache), as a ratio.
#   tests/bench/bench_scan.sh [BUILD_DIR] [FILES]     (default build, 20000)
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$TOP/build}
FILES=${2:-20000}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
SCAN=$BUILD/tests/scan_dump
[ -x "$SCAN" ] || { echo "bench_scan: build $SCAN first (make unit-bins)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpurun-bench-scan.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export HOME=$WORK/home GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"

python3 - "$WORK/tree" "$FILES" <<'PY'
import os, random, sys
top, total = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
os.makedirs(top)
n = d = 0
while n < total:
    sub = os.path.join(top, "src%03d" % (d // 5), "mod%d" % (d % 5))
    os.makedirs(sub, exist_ok=True)
    if d % 5 == 0:
        with open(os.path.join(sub, ".gitignore"), "w") as f:
            f.write("*.tmp\n!keep.log\n/local/\n")
    for k in range(min(100, total - n)):
        ext = rng.choice([".py", ".py", ".txt", ".o", ".pyc", ".json", ".log"])
        open(os.path.join(sub, "file%03d%s" % (k, ext)), "w").close()
        n += 1
    d += 1
with open(os.path.join(top, ".gitignore"), "w") as f:
    f.write("*.o\n*.pyc\n__pycache__/\nbuild/\n*.egg-info/\n.venv/\n*.log\n!important.log\n"
            "data/raw/\n**/checkpoints/\n*.ckpt\nwandb/\n[Tt]emp*/\n*.sw[op]\n")
PY
git -C "$WORK/tree" init -q

best_of() { # best_of N CMD...: best wall time in ms
	local n=$1 best= t0 t1 ms
	shift
	for _ in $(seq "$n"); do
		t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N)
		ms=$(( (t1 - t0) / 1000 ))
		if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
	done
	echo "$best"
}

"$SCAN" "$WORK/tree" >/dev/null # warm the cache
line=$("$SCAN" --bench 20 "$WORK/tree")
git_us=$(best_of 20 git -C "$WORK/tree" ls-files --others --exclude-standard)
all_us=$(best_of 20 find "$WORK/tree" -printf '%s %T@\n')
echo "files: $FILES"
echo "gpurun $line"
echo "git ls-files -o --exclude-standard: best $((git_us / 1000)).$(( (git_us % 1000) / 10 )) ms (process included)"
echo "find -printf size+mtime: best $((all_us / 1000)).$(( (all_us % 1000) / 10 )) ms (process included)"
