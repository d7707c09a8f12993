#!/bin/bash
# The box as a queue (issue 33): N one-second jobs (default 200) on a
# host of 2 fake GPUs (the recorded nvidia-smi), gpus = 1 each, started
# as one sweep while a 2-GPU job holds both GPUs; then that job ends and
# the line runs. Measured:
#  - while all N wait: the CPU their supervisors and the agent use (ms of
#    CPU per second of waiting: no polling means near 0), and their
#    memory (the sum of their RSS);
#  - from the blocker's end to the last job's end, against the ideal
#    N x 1 s / 2 GPUs; the overhead per job start;
#  - the order: how many jobs started before one that was ahead of them
#    in line (0: first come, first served).
#   BENCH_QUEUE_JOBS=200 tests/bench/run.sh build queue
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"

N=${BENCH_QUEUE_JOBS:-200}
P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R"
write_ini "$P" local local "$R"
cat >>"$P/gpurun.ini" <<INI
[build]
command =
[train]
command = sleep 1
gpus = 1
[jobs]
keep = 0
INI
export GPURUN_NVIDIA_SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi
stop_all() {
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

# The supervisors' CPU (ms) and RSS (KiB), summed.
sup_pids() { pgrep -f "gpurun-agent supervise $HOME/" ; }
sup_cpu_ms() {
	local t=0 hz; hz=$(getconf CLK_TCK)
	for p in $(sup_pids); do
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo $((t * 1000 / hz))
}
sup_rss_kib() { for p in $(sup_pids); do awk '/^VmRSS/ { print $2 }' "/proc/$p/status" 2>/dev/null; done | awk '{ s += $1 } END { print s + 0 }'; }

cd "$P" || exit 1
blocker=$("$GPURUN" -q -o train.gpus=2 train --detach -- sh -c 'while ! test -e go; do sleep 0.05; done') || exit 1
t0=$(date +%s%N)
"$GPURUN" -q train --name q --sweep "i=$(seq -s, 1 "$N")" >"$TRASH/sweep.out" || { say "the sweep did not start"; exit 1; }
t1=$(date +%s%N)
# Wait until every one of them waits in line.
for _i in $(seq 1 600); do
	q=$("$GPURUN" status --all --json | grep -c '"state": "queued"')
	[ "$q" -ge "$N" ] && break
	sleep 0.2
done
say "$N jobs started as one sweep in $(( (t1 - t0) / 1000000 )) ms; $q of them queued"
c0=$(sup_cpu_ms) w0=$(date +%s%N)
sleep 10
c1=$(sup_cpu_ms) w1=$(date +%s%N)
rss=$(sup_rss_kib) nsup=$(sup_pids | wc -l)
wait_ms=$(( (w1 - w0) / 1000000 ))
bdir=$(ls -d "$HOME"/.cache/gpurun/jobs/*/"$blocker")
touch "$bdir/go"
go=$(date +%s%N)
for _i in $(seq 1 $((N * 10))); do
	"$GPURUN" status --all --json >"$TRASH/st.json"
	grep -q '"state": "\(queued\|running\|starting\)"' "$TRASH/st.json" || break
	sleep 1
done
python3 - "$TRASH/st.json" "$N" "$go" "$c0" "$c1" "$wait_ms" "$rss" "$nsup" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2]); go = int(sys.argv[3]) / 1e9
c0, c1, wait_ms, rss, nsup = (int(x) for x in sys.argv[4:9])
jobs = [j for j in d["jobs"] if j.get("group") == "q"]
done = [j for j in jobs if j["state"] == "done"]
# status --json schema 1: times as RFC 3339 and as *_unix_ms
for j in jobs:
    for k in ("created", "start", "end"):
        j[k] = j[k + "_unix_ms"] / 1000 if j[k + "_unix_ms"] is not None else None
end = max(j["end"] for j in done) if done else go
ideal = n * 1.0 / 2
total = end - go
# the line's order: the order they joined it, which for a sweep started
# in one go is the order they were created
by_created = sorted(jobs, key=lambda j: (j["created"], j["id"]))
starts = [j["start"] or 0 for j in by_created]
inversions = sum(1 for i in range(len(starts)) for k in range(i + 1, len(starts)) if starts[k] < starts[i] - 0.001)
ran = sorted(j["end"] - j["start"] for j in done)
print(f"jobs: {n}, done: {len(done)}, GPUs: 2, each: sleep 1")
print(f"while {nsup} waited {wait_ms / 1000:.1f} s: supervisors' CPU {c1 - c0} ms "
      f"({(c1 - c0) / (wait_ms / 1000):.1f} ms/s), their RSS {rss / 1024:.0f} MiB in all "
      f"({rss / max(nsup, 1):.0f} KiB each)")
print(f"the line ran in {total:.1f} s; ideal {ideal:.1f} s: {total / ideal:.3f}x ideal, "
      f"{(total - ideal) * 2 / n * 1000:.0f} ms per job start beyond its second")
print(f"order: {inversions} pairs started out of line order")
print(f"a job's own run: median {ran[len(ran) // 2]:.3f} s" if ran else "no job ran")
PY
test_done
