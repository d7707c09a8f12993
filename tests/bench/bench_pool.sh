#!/bin/bash
# A pool of boxes (issue 34): `gpurun status` on 1, 3 and 8 sshd "boxes"
# on loopback (each its own home, GPU locks and recorded nvidia-smi), and
# the job's box found by `logs ID` on 8, against the peer in the same run:
# one `ssh box nvidia-smi` per box, all at once (what a script that asks
# each box would do, with no agent). The pool asks every box at once, so
# its time should stay near one box's as the pool grows.
#   BENCH_POOL_ROUNDS=5 tests/bench/run.sh build pool
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"

ROUNDS=${BENCH_POOL_ROUNDS:-5}
P=$TRASH/proj
mkdir -p "$P"
all=
for i in 1 2 3 4 5 6 7 8; do
	mkdir -p "$TRASH/smi-b$i" "$TRASH/locks-b$i" && chmod 1777 "$TRASH/locks-b$i"
	cp "$TOP/tests/data/nvidia-smi/fake-nvidia-smi" "$TOP/tests/data/nvidia-smi/gpus.csv" "$TRASH/smi-b$i/"
	start_sshd "b$i" "SetEnv HOME=$TRASH/b$i-home GPURUN_LOCK_DIR=$TRASH/locks-b$i GPURUN_NVIDIA_SMI=$TRASH/smi-b$i/fake-nvidia-smi" &&
		trust_sshd "b$i" || exit 1
	all="$all b$i"
done
cat >"$P/gpurun.ini" <<INI
[remote]
host = b1
path = proj
[build]
command =
[train]
gpus = 1
command = echo hi
INI
cd "$P" || exit 1
# Warm every box: the agent uploaded, one job on b8 for `logs`.
for i in 1 2 3 4 5 6 7 8; do "$GPURUN" -q --host "b$i" status >/dev/null || exit 1; done
id=$("$GPURUN" -q --host b8 train --detach) || exit 1
sleep 1

# ms_of CMD...: the wall time of one run, in ms.
ms_of() { local t0; t0=$(date +%s%N); "$@" >/dev/null 2>&1 || echo "bench: '$*' failed" >&2; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
peer() { for h in "$@"; do ssh -F "$HOME/.ssh/config" "$h" "$TRASH/smi-b1/fake-nvidia-smi --query-gpu=x" & done; wait; }
# rss_of CMD...: peak RSS (KiB) of the client and its children.
rss_of() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1; }

printf '%-28s %10s %10s %8s %12s\n' case "gpurun ms" "peer ms" ratio "peak RSS KiB"
for n in 1 3 8; do
	hosts=$(echo $all | cut -d' ' -f1-$n)
	g= s=
	for r in $(seq 1 "$ROUNDS"); do
		g="$g $(ms_of "$GPURUN" -o "remote.host=$hosts" status)"
		s="$s $(ms_of peer $hosts)"
	done
	gm=$(printf "%s\n" $g | median) sm=$(printf "%s\n" $s | median)
	printf '%-28s %10s %10s %8s %12s\n' "status, $n box(es)" "$gm" "$sm" "$(ratio "$gm" "$sm")" \
		"$(rss_of "$GPURUN" -o "remote.host=$hosts" status)"
done
g= s=
for r in $(seq 1 "$ROUNDS"); do
	g="$g $(ms_of "$GPURUN" -o "remote.host=$all" logs "$id")"
	s="$s $(ms_of "$GPURUN" --host b8 logs "$id")"
done
gm=$(printf "%s\n" $g | median) sm=$(printf "%s\n" $s | median)
printf '%-28s %10s %10s %8s\n' "logs ID, found among 8" "$gm" "$sm" "$(ratio "$gm" "$sm")"
echo "(peer for 'logs ID': gpurun --host b8 logs ID, the box named by hand)"
test_done
