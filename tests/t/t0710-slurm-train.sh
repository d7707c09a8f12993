#!/bin/bash
# The Slurm backend against a real one-node cluster (tests/slurm.sh),
# reached over the test sshd as a login node ([remote] scheduler = slurm):
# submit and stream, exit status passed through, GPU choice by gres, two
# tasks with their ranks (none for one task), SIGUSR1 and stop's grace
# reaching a program the shell runs (one task and two), a failing rank's
# status, a submit whose answer was lost (found by the job's name), stop
# of a running and of a pending job, a job
# cancelled by hand, the time limit after the signal (and resubmission),
# build_on = compute, doctor, logs -f across a cut connection, one squeue
# for all pending jobs (no poller left per job) and a hung slurmctld, and
# sacct present and absent.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../slurm.sh"
. "$(dirname "$0")/../container.sh"

if why=$(slurm_missing); then
	test_skip 'the Slurm backend' "$why"
	test_done
fi

LH=$TRASH/login-home
start_sshd login "SetEnv HOME=$LH $(slurm_sshd_env)" && trust_sshd login ||
	{ echo "not ok - $TEST_NAME: sshd"; exit 1; }
# A requeued job waits cred_expire seconds before it starts again.
SLURM_CRED_EXPIRE=10 slurm_start || { echo "not ok - $TEST_NAME: the cluster did not start"; exit 1; }

P=$TRASH/proj
R=$LH/proj
mkdir -p "$P"
S=$$ # unique sleep lengths, so pgrep sees only this run's
# ini LINES...: gpurun.ini for the login node with [remote] scheduler =
# slurm, then the lines given (sections included).
ini() {
	write_ini "$P" login libssh2 proj
	printf 'scheduler = slurm\n[build]\ncommand =\n' >>"$P/gpurun.ini"
	for kv in "$@"; do printf '%s\n' "$kv"; done >>"$P/gpurun.ini"
}
last_id() { head -n1 "$P/.gpurun/jobs" | cut -f1; }
# json_field FILE KEY: a string or number field of status --json.
json_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; d=d.get("jobs",[d])[0] if "jobs" in d else d; print(d.get(sys.argv[2],""))' "$1" "$2"; }
# sid JOB: the job's Slurm id, from status --json.
sid() { (cd "$P" && "$GPURUN" status --json "$1" >"$TRASH/sid.json") && json_field "$TRASH/sid.json" slurm_id; }
sstate() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
wait_grep() {
	for _i in $(seq 1 $((${3:-60} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
# wait_status JOB STATE [SECONDS]: until gpurun status says STATE.
wait_status() {
	for _i in $(seq 1 $((${3:-60} * 5))); do
		(cd "$P" && "$GPURUN" status --json "$1" >"$TRASH/ws.json" 2>/dev/null) &&
			[ "$(json_field "$TRASH/ws.json" state)" = "$2" ] && return 0
		sleep 0.2
	done
	say "job $1 is not $2:"; cat "$TRASH/ws.json" >&2; return 1
}
T=$TRASH/out && mkdir -p "$T"

# The time limit: Slurm checks limits every 30 s (and sends the
# --signal warning up to 30 s early), so this job starts first and is
# checked at the end, while the other cases run. The warning and the
# TERM often come in the same pass, in either order: the TERM trap waits
# a second, as a program that checkpoints on TERM would (Slurm may send
# TERM more than once: each run needs one). A warning that
# comes before the command has started is not passed on (it would kill a
# program with no handler yet); the log says so, and that counts.
TL=$TRASH/tl && mkdir -p "$TL"
test_expect_success 'a job with a time limit, signal_before and resubmit starts (checked later)' '
	write_ini "$TL" login libssh2 tlproj &&
	printf "scheduler = slurm\n[build]\ncommand =\n[train]\ncommand = %s\npersist = ckpt/\n[slurm]\ntime = 0:20\nsignal_before = 10\nresubmit = true\nmax_resubmits = 1\n" \
		"mkdir -p ckpt; n=\$((\$(cat ckpt/n 2>/dev/null || echo 0) + 1)); echo \$n >ckpt/n; echo run \$n; trap \"echo got-usr1\" USR1; trap \"echo got-term; sleep 1; exit 0\" TERM; echo up; while :; do sleep 0.2; done" >>"$TL/gpurun.ini" &&
	cd "$TL" && tl_id=$("$GPURUN" -q train -d) && test -n "$tl_id"
'

test_expect_success 'train submits with sbatch and streams the log; exit 0' '
	cd "$P" && ini "[train]" "command = echo hello from \$SLURM_JOB_ID; echo job \$GPURUN_JOB_ID" &&
	"$GPURUN" train >$T/out 2>$T/err &&
	id=$(last_id) && test_grep "submitted to Slurm as job [0-9]" $T/out &&
	n=$(sed -n "s/.*submitted to Slurm as job \([0-9]*\).*/\1/p" $T/out | head -n1) &&
	test_grep -x "hello from $n" $T/out && test_grep -x "job $id" $T/out &&
	test_grep "exited with status 0" $T/err &&
	test "$(sid "$id")" = "$n" && test "$(sstate "$n")" = COMPLETED &&
	test "$(json_field $TRASH/sid.json state)" = done &&
	test -f "$R/../.cache/gpurun/jobs/proj/$id/.gpurun/slurm-batch.sh" || test -n "$(find "$LH" -name slurm-batch.sh)"
'

test_expect_success 'exit status passes through: 3, and 143 for a SIGTERM' '
	cd "$P" &&
	ini "[train]" "command = echo failing; exit 3" && test_expect_code 3 "$GPURUN" -q train >$T/out &&
	test_grep -x failing $T/out &&
	id=$(last_id) && n=$(sid "$id") && test "$(sstate "$n")" = FAILED &&
	test "$(scontrol -o show job "$n" | grep -o "ExitCode=[0-9:]*")" = ExitCode=3:0 &&
	ini "[train]" "command = kill -TERM \$\$" && test_expect_code 143 "$GPURUN" -q train >/dev/null
'

test_expect_success '--after waits on the login node, then submits; :ok of a failed job: cancelled, never submitted' '
	ini "[train]" "command = sleep 1; exit 3" && cd "$P" &&
	a=$("$GPURUN" -q train --detach) &&
	b=$("$GPURUN" -q train --after "$a:ok" --detach) &&
	c=$("$GPURUN" -q train --after "$a" --detach -- echo after-ran) &&
	"$GPURUN" status "$c" >sc && test_grep "waiting for job $a to end" sc &&
	wait_status "$b" cancelled && wait_status "$c" done &&
	"$GPURUN" logs "$c" >lc && test_grep -x after-ran lc &&
	"$GPURUN" status --json "$b" >jb && test_grep "\"slurm_id\": null" jb &&
	test_expect_code 1 "$GPURUN" logs -f "$b" >lb 2>eb && test_grep "was cancelled before it started" eb
'

test_expect_success '[train] time_limit in the batch step: timeout, exit 247, its own words' '
	ini "[train]" "command = echo begun; sleep 60" "time_limit = 2s" "stop_grace = 1" && cd "$P" &&
	test_expect_code 247 "$GPURUN" train >out 2>err &&
	test_grep "time limit reached (2s)" out &&
	test_grep "reached its time limit (\[train\] time_limit = 2s)" err
'

test_expect_success '[train] gpus = N becomes --gres=gpu:N: CUDA_VISIBLE_DEVICES' '
	cd "$P" && ini "[train]" "command = echo cvd=\$CUDA_VISIBLE_DEVICES" "gpus = 1" &&
	"$GPURUN" -q train >$T/out && test_grep -x cvd=0 $T/out &&
	ini "[train]" "command = echo cvd=\$CUDA_VISIBLE_DEVICES" "gpus = 2" &&
	"$GPURUN" -q train >$T/out && test_grep -x cvd=0,1 $T/out &&
	ini "[train]" "command = true" "gpus = 3" &&
	test_expect_code 1 "$GPURUN" train >$T/out 2>$T/err &&
	test_grep -i "sbatch failed.*configuration is not available" $T/out
'

test_expect_success '[train] gpus = all (init'"'"'s default) asks for every GPU of the node: --gres=gpu:2' '
	cd "$P" && ini "[train]" "command = echo cvd=\$CUDA_VISIBLE_DEVICES" "gpus = all" &&
	"$GPURUN" -q train >$T/out && test_grep -x cvd=0,1 $T/out &&
	n=$(sid "$(last_id)") && scontrol -o show job "$n" >$T/sj &&
	test_grep "gres[/:]gpu[:=]2" $T/sj
'

test_expect_success 'ntasks_per_node = 2: each task has its RANK, LOCAL_RANK, WORLD_SIZE' '
	cd "$P" && ini "[train]" "command = echo rank=\$RANK local=\$LOCAL_RANK node=\$NODE_RANK of \$WORLD_SIZE at \$MASTER_ADDR:\$MASTER_PORT" \
		"[slurm]" "ntasks_per_node = 2" &&
	"$GPURUN" -q train >$T/out &&
	test_grep "^rank=0 local=0 node=0 of 2 at [^:]*:[0-9][0-9]*\$" $T/out &&
	test_grep "^rank=1 local=1 node=0 of 2 at [^:]*:[0-9][0-9]*\$" $T/out &&
	test "$(grep -c "^rank=" $T/out)" = 2 &&
	test "$(sed -n "s/.* at //p" $T/out | sort -u | wc -l)" = 1
'

# [slurm] signal_before and stop, however the command is written: a
# program the shell runs (no `exec`) gets SIGUSR1 and can checkpoint,
# the shell does not die of it (one task: "killed by signal 10"; two:
# the ranks ran on outside Slurm's tracking), and a stop gives every rank
# the grace one task gets. The warning is sent as Slurm sends
# --signal=B:USR1 (to the batch step's shell), at once instead of near a
# time limit.
cat >"$P/ckpt.py" <<'EOF'
import os, signal, sys, time
os.makedirs("ckpt", exist_ok=True)
step = int(open("ckpt/step").read()) if os.path.exists("ckpt/step") else 0
if step:
    print("resumed at %d" % step, flush=True)
    sys.exit(0)
def warn(sig, frame):
    open("ckpt/step", "w").write(str(step))
    print("checkpoint at %d" % step, flush=True)
signal.signal(signal.SIGUSR1, warn)
print("up", flush=True)
while True:
    step += 1
    time.sleep(0.02)
EOF
cat >"$P/ranks.py" <<'EOF'
import os, signal, sys, time
rank = os.environ["RANK"]
def warn(sig, frame):
    print("rank %s got usr1" % rank, flush=True)
def term(sig, frame):
    time.sleep(2)
    print("rank %s checkpointed" % rank, flush=True)
    sys.exit(0)
signal.signal(signal.SIGUSR1, warn)
signal.signal(signal.SIGTERM, term)
print("rank %s up" % rank, flush=True)
while True:
    time.sleep(0.1)
EOF

test_expect_success 'signal_before: python under sh gets SIGUSR1, checkpoints; requeued, it resumes' '
	cd "$P" && ini "[train]" "command = python3 ckpt.py" "[slurm]" "requeue = true" "signal_before = 30" &&
	id=$("$GPURUN" -q train -d) && n=$(sid "$id") &&
	{ "$GPURUN" logs -f "$id" >$T/ck 2>$T/ckerr & lpid=$!; } &&
	wait_grep "^up\$" $T/ck && scancel --batch --signal=USR1 "$n" &&
	wait_grep "^checkpoint at [1-9]" $T/ck 30 && test "$(sstate "$n")" = RUNNING &&
	test_grep "SIGUSR1 sent to the job" $T/ck &&
	scontrol requeue "$n" &&
	{ wait $lpid; rc=$?; } && test $rc = 0 &&
	test_grep "^resumed at [1-9]" $T/ck && ! test_grep "signal 10" $T/ckerr &&
	"$GPURUN" status --json "$id" >$T/ck.json && test "$(json_field $T/ck.json state)" = done
'

test_expect_success 'two tasks: SIGUSR1 reaches each rank; stop gives each rank its grace' '
	cd "$P" && ini "[train]" "command = python3 ranks.py" "stop_grace = 20" \
		"[slurm]" "ntasks_per_node = 2" "signal_before = 30" &&
	id=$("$GPURUN" -q train -d) && n=$(sid "$id") &&
	{ "$GPURUN" logs -f "$id" >$T/rk 2>$T/rkerr & lpid=$!; } &&
	wait_grep "^rank 0 up\$" $T/rk && wait_grep "^rank 1 up\$" $T/rk &&
	scancel --batch --signal=USR1 "$n" &&
	wait_grep "^rank 0 got usr1\$" $T/rk 30 && wait_grep "^rank 1 got usr1\$" $T/rk 30 &&
	sleep 1 && test "$(sstate "$n")" = RUNNING &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err &&
	{ wait $lpid; rc=$?; } &&
	test_grep -x "rank 0 checkpointed" $T/rk && test_grep -x "rank 1 checkpointed" $T/rk &&
	wait_status "$id" stopped
'

test_expect_success 'one task: no RANK, WORLD_SIZE, LOCAL_RANK (as on one box)' '
	cd "$P" && ini "[train]" "command = echo rank=\${RANK-unset} ws=\${WORLD_SIZE-unset} lr=\${LOCAL_RANK-unset}" &&
	"$GPURUN" -q train >$T/out && test_grep -x "rank=unset ws=unset lr=unset" $T/out
'

test_expect_success 'two tasks: a failing rank ends the job with its status; the log and status name it' '
	cd "$P" && ini "[train]" "command = if [ \$RANK = 1 ]; then sleep 1; echo rank 1 fails; exit 3; fi; sleep $((S + 5))" \
		"[slurm]" "ntasks_per_node = 2" &&
	test_expect_code 3 "$GPURUN" train >$T/out 2>$T/err && id=$(last_id) &&
	test_grep "rank 1 on [^ ]* exited with status 3 first" $T/out &&
	"$GPURUN" status --json "$id" >$T/fr.json && test "$(json_field $T/fr.json state)" = failed &&
	json_field $T/fr.json reason >$T/fr && test_grep "rank 1 on [^ ]* failed first (exit 3)" $T/fr &&
	! pgrep -f "^sleep $((S + 5))\$"
'

# scancel --full signals each process of the job in turn. When sleep's
# TERM comes first, dash's "wait" returns 0 at once and the script could
# end before its own TERM is taken: exit 0, no "got-term" (once in CI;
# 2 in 300 tries by hand, bash 0). The loop after it keeps the shell there
# until the trap runs.
test_expect_success 'stop of a running job: TERM first, scancel; its processes are gone' '
	cd "$P" && ini "[train]" "command = trap \"echo got-term; exit 7\" TERM; echo up; sleep $S & wait; while :; do sleep 0.1; done" \
		"stop_grace = 20" &&
	"$GPURUN" train -d >$T/id 2>$T/err && id=$(cat $T/id) &&
	{ "$GPURUN" logs -f "$id" >$T/log 2>&1 & lpid=$!; } &&
	wait_grep "^up\$" $T/log && n=$(sid "$id") && test "$(sstate "$n")" = RUNNING &&
	pgrep -f "^sleep $S\$" >/dev/null &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err &&
	test_grep "stopped job $id: SIGTERM to every process of Slurm job $n\$" $T/err &&
	test_grep -E "gpurun: Slurm job $n: (FAILED|CANCELLED)\$" $T/err &&
	test_grep "exited with status 7" $T/err &&
	{ wait $lpid || :; } && test_grep -x got-term $T/log &&
	wait_status "$id" stopped && case $(sstate "$n") in FAILED|CANCELLED) ;; *) false ;; esac &&
	! pgrep -f "^sleep $S\$"
'

test_expect_success 'stop of a job that ignores SIGTERM: scancel after the grace period' '
	cd "$P" && ini "[train]" "command = trap \"echo ignored\" TERM; echo up; while :; do sleep 0.2; done" \
		"stop_grace = 2" &&
	"$GPURUN" train -d >$T/id 2>$T/err && id=$(cat $T/id) && n=$(sid "$id") &&
	for i in $(seq 1 300); do grep -q "^up" "$(find "$LH" -path "*/$id/.gpurun/log")" && break; sleep 0.1; done &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err &&
	test_grep "SIGTERM to every process of Slurm job $n, scancel after the grace period" $T/err &&
	test_grep "Slurm job $n: CANCELLED" $T/err &&
	wait_status "$id" stopped && test "$(sstate "$n")" = CANCELLED &&
	"$GPURUN" logs "$id" >$T/log && test_grep -x ignored $T/log
'

test_expect_success 'stop of a pending job: queued with its reason, then cancelled' '
	cd "$P" && blocker=$(sbatch --parsable --gres=gpu:2 -o /dev/null --wrap "sleep $((S + 1))") &&
	slurm_wait_state "$blocker" RUNNING 60 &&
	ini "[train]" "command = touch $TRASH/pending-ran" "gpus = 1" &&
	"$GPURUN" train -d >$T/id 2>$T/err && id=$(cat $T/id) &&
	wait_status "$id" queued && (cd "$P" && "$GPURUN" status "$id" >$T/st) &&
	for i in $(seq 1 100); do
		"$GPURUN" status --json "$id" >$T/js && grep -q Resources $T/js && break; sleep 0.2
	done && test_grep Resources $T/js &&
	n=$(sid "$id") && test "$(sstate "$n")" = PENDING &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err &&
	test_grep "Slurm job $n: CANCELLED" $T/err &&
	slurm_wait_state "$n" CANCELLED 30 && wait_status "$id" stopped &&
	scancel "$blocker" && ! test -e $TRASH/pending-ran
'

test_expect_success 'a job cancelled outside gpurun (scancel by hand) says so' '
	cd "$P" && ini "[train]" "command = echo up; sleep $((S + 2))" &&
	{ "$GPURUN" train >$T/out 2>$T/err & tpid=$!; } &&
	wait_grep "^up\$" $T/out && id=$(last_id) && n=$(sid "$id") &&
	ssh -F "$HOME/.ssh/config" login scancel "$n" &&
	{ wait $tpid; rc=$?; } && test $rc = 143 &&
	test_grep "was cancelled outside gpurun" $T/err &&
	wait_status "$id" cancelled && ! pgrep -f "^sleep $((S + 2))\$"
'

test_expect_success '[slurm] requeue: a job Slurm requeues runs again; the first run is not its end' '
	cd "$P" && ini "[train]" "command = n=\$((\$(cat runs 2>/dev/null || echo 0) + 1)); echo \$n >runs; echo run \$n; [ \$n = 1 ] && { sleep $((S + 3)) & wait; }; exit 0" \
		"[slurm]" "requeue = true" &&
	id=$("$GPURUN" -q train -d) && n=$(sid "$id") &&
	{ "$GPURUN" logs -f "$id" >$T/rq 2>$T/rqerr & lpid=$!; } &&
	wait_grep "^run 1\$" $T/rq && scontrol requeue "$n" &&
	{ wait $lpid; rc=$?; } && test $rc = 0 &&
	test_grep -x "run 2" $T/rq && test_grep "Slurm requeued job $n: run 2 starts" $T/rq &&
	"$GPURUN" status --json "$id" >$T/rq.json && test "$(json_field $T/rq.json state)" = done
'

test_expect_success '[slurm] build_on = compute: setup and build run inside the job' '
	cd "$P" && ini "[setup]" "command = echo setup-in-\$SLURM_JOB_ID" "[train]" "command = cat built" \
		"[slurm]" "build_on = compute" &&
	sed -i "s/^command =\$/command = echo built-in-\$SLURM_JOB_ID >built/" gpurun.ini &&
	"$GPURUN" -q train >$T/out && n=$(sid "$(last_id)") &&
	test_grep -x "setup-in-$n" $T/out && test_grep -x "built-in-$n" $T/out
'

test_expect_success 'doctor: sbatch and squeue on the login node, the partition and its GPUs; completion offers partitions' '
	cd "$P" && ini "[train]" "command = true" "gpus = 1" &&
	"$GPURUN" doctor >$T/doc 2>&1 && test_grep "sbatch.*/sbatch" $T/doc &&
	test_grep "squeue.*/squeue" $T/doc &&
	test_grep "partition.*gpu (the default): up, 1 node ([a-z]*[^)]*), gres gpu:2" $T/doc &&
	! test_grep "warn.*gpus" $T/doc &&
	ini "[train]" "command = true" "gpus = all" && "$GPURUN" doctor >$T/doc 2>&1 &&
	test_grep "ok *gpus *\[train\] gpus = all asks for every GPU of a node of partition gpu: --gres=gpu:2\$" $T/doc &&
	ini "[train]" "command = true" "gpus = 3" && { "$GPURUN" doctor >$T/doc 2>&1 || :; } &&
	test_grep "warn *gpus *\[train\] gpus = 3, but a node of partition gpu has 2 GPUs: Slurm will not start the job" $T/doc &&
	"$GPURUN" __complete -o slurm.partition= | cut -f1 >$T/comp &&
	test_grep -x "slurm.partition=gpu" $T/comp && test_grep -x "slurm.partition=debug" $T/comp &&
	ini "[train]" "command = true" "[slurm]" "partition = nope" &&
	! "$GPURUN" doctor >$T/doc 2>&1 &&
	test_grep "no partition .nope. on this cluster (it has: gpu debug)" $T/doc
'

# A submit whose answer was lost: a stand-in sbatch first on the login
# node's PATH runs the real one, then says what a busy slurmctld makes it
# say and exits 1 (or kills the submitting supervisor, its parent, as a
# kill right after sbatch would). gpurun finds the job by its name
# (gpurun-<id>) and records it; stop reaches it.
FB=$TRASH/fakebin && mkdir -p "$FB/lost" "$FB/killed"
printf '#!/bin/sh\n%s "$@" >/dev/null 2>&1\necho "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2\nexit 1\n' \
	"$(command -v sbatch)" >"$FB/lost/sbatch"
printf '#!/bin/sh\n%s "$@"\nkill -9 $PPID\nexit 0\n' "$(command -v sbatch)" >"$FB/killed/sbatch"
chmod +x "$FB/lost/sbatch" "$FB/killed/sbatch"
start_sshd lost "SetEnv HOME=$LH PATH=$FB/lost:$PATH $(slurm_sshd_env)" && trust_sshd lost
start_sshd killed "SetEnv HOME=$LH PATH=$FB/killed:$PATH $(slurm_sshd_env)" && trust_sshd killed

test_expect_success 'sbatch answers "Socket timed out" but Slurm took the job: found by its name; stop reaches it' '
	cd "$P" && ini "[train]" "command = echo up; sleep $((S + 6))" "stop_grace = 5" &&
	sed -i "s/^host = login\$/host = lost/" gpurun.ini &&
	id=$("$GPURUN" -q train -d) && wait_status "$id" running 30 &&
	n=$(sid "$id") && test -n "$n" &&
	test "$(scontrol -o show job "$n" | grep -o "JobName=[^ ]*")" = "JobName=gpurun-$id" &&
	"$GPURUN" logs "$id" >$T/lost && test_grep "sbatch said .*Socket timed out.*, but Slurm has the job: Slurm job $n" $T/lost &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err && wait_status "$id" stopped &&
	case $(sstate "$n") in FAILED|CANCELLED|COMPLETING) ;; *) false ;; esac &&
	! pgrep -f "^sleep $((S + 6))\$"
'

test_expect_success 'the submitter killed right after sbatch: the job is found by its name, not lost' '
	cd "$P" && ini "[train]" "command = echo up; sleep $((S + 7))" "stop_grace = 5" &&
	sed -i "s/^host = login\$/host = killed/" gpurun.ini &&
	id=$("$GPURUN" -q train -d) && wait_status "$id" running 30 &&
	n=$(sid "$id") && test -n "$n" &&
	"$GPURUN" logs "$id" >$T/killed && test_grep "Slurm has it by its name: Slurm job $n" $T/killed &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err && wait_status "$id" stopped &&
	! pgrep -f "^sleep $((S + 7))\$"
'

# [slurm] nodes = 2 (one task per node, 2 x 2 tasks, a rank failing on
# the second node, stop on both): t0712-slurm-nodes.sh, on a cluster of
# two nodes in namespaces of their own (the whole test in a network
# namespace of its own).

# [container] image under Slurm: the batch step runs the job's steps in
# the image with the test's own podman (tests/container.sh), reached
# through a second login sshd whose sessions point podman at it.
if ! why=$(container_missing podman) && container_start podman; then
	start_sshd login2 "SetEnv HOME=$LH $(slurm_sshd_env) $(container_env podman)" && trust_sshd login2
	test_expect_success '[container] image: the job runs in the image on the compute node' '
		cd "$P" && ini "[train]" "command = cat /etc/gpurun-test-image; echo in-\$SLURM_JOB_ID; exit 3" \
			"[container]" "image = $CONTAINER_IMAGE" "runtime = podman" &&
		sed -i "s/^host = login\$/host = login2/" gpurun.ini &&
		test_expect_code 3 "$GPURUN" train >$T/ctr 2>$T/ctrerr && id=$(last_id) && n=$(sid "$id") &&
		test_grep -x "gpurun test image" $T/ctr && test_grep -x "in-$n" $T/ctr &&
		test_grep "in a container: $CONTAINER_IMAGE (podman)" $T/ctr &&
		test "$(ctr podman ps -a --filter "label=gpurun.job=$id" --format "{{.Names}}")" = ""
	'
	test_expect_success '[container] image: stop ends the container too' '
		cd "$P" && ini "[train]" "command = echo up; sleep $((S + 4))" \
			"[container]" "image = $CONTAINER_IMAGE" "runtime = podman" &&
		sed -i "s/^host = login\$/host = login2/" gpurun.ini &&
		id=$("$GPURUN" -q train -d) && n=$(sid "$id") &&
		for i in $(seq 1 600); do
			test "$(ctr podman ps --filter "label=gpurun.job=$id" --format "{{.Names}}")" = "gpurun-$id" && break
			sleep 0.1
		done &&
		"$GPURUN" -o train.stop_grace=5 stop "$id" >$T/out 2>$T/err &&
		wait_status "$id" stopped &&
		for i in $(seq 1 300); do
			test -z "$(ctr podman ps -a --filter "label=gpurun.job=$id" --format "{{.Names}}")" && break
			sleep 0.1
		done &&
		test -z "$(ctr podman ps -a --filter "label=gpurun.job=$id" --format "{{.Names}}")" &&
		! pgrep -f "^sleep $((S + 4))\$"
	'
else
	test_skip '[container] image under Slurm' "${why:-$CONTAINER_WHY}"
fi

test_expect_success 'logs -f through a cut connection: every line once, the status' '
	start_proxy wan "$SSHD_PORT_login" 5 && ssh_host_via viaproxy login "$PROXY_PORT_wan" &&
	cd "$P" && ini "[train]" "command = i=1; while [ \$i -le 120 ]; do echo \"numbered line \$i\"; i=\$((i+1)); sleep 0.04; done; exit 9" &&
	sed -i "s/^host = login/host = viaproxy/" gpurun.ini &&
	id=$("$GPURUN" -q train -d) &&
	{ "$GPURUN" logs -f "$id" >$T/cut 2>$T/cuterr & lpid=$!; } &&
	wait_grep "line 20\$" $T/cut && proxy_cut wan && wait_grep reconnected $T/cuterr &&
	wait_grep "line 40\$" $T/cut && proxy_cut wan &&
	{ wait $lpid; rc=$?; } && test $rc = 9 &&
	seq 1 120 | sed "s/^/numbered line /" >$T/want && grep -v "^\[gpurun\]" $T/cut >$T/got &&
	test_cmp $T/want $T/got && test $(grep -c reconnected $T/cuterr) -ge 2
'

test_expect_success 'the time limit: SIGUSR1, TERM, resubmitted once, resumed; timeout, exit 247' '
	cd "$TL" && { "$GPURUN" logs -f "$tl_id" >$T/tl 2>$T/tlerr; rc=$?; } &&
	test $rc = 247 && test_grep -x "run 1" $T/tl && test_grep -x "run 2" $T/tl &&
	{ awk "/running as Slurm job/ { r++ } /^got-usr1\$|the command has not started/ { u[r]++ }
		/^got-term\$/ { t[r]++ } END { exit !(r == 2 && u[1] == 1 && u[2] == 1 && t[1] && t[2]) }" $T/tl ||
		{ say "want, in each run, got-usr1 (or a note that it came too early) once and got-term:"
		  cat $T/tl >&2; false; }; } &&
	test_grep "time limit is near: SIGUSR1 sent" $T/tl &&
	test_grep "submitted again as Slurm job [0-9]* (resubmission 1 of 1)" $T/tl &&
	test_grep "not submitted again: \[slurm\] max_resubmits (1) reached" $T/tl &&
	test_grep "reached its Slurm time limit" $T/tlerr &&
	"$GPURUN" status --json "$tl_id" >$T/tl.json && test "$(json_field $T/tl.json state)" = timeout &&
	test "$(json_field $T/tl.json submits)" = 2 &&
	test "$(sstate "$(json_field $T/tl.json slurm_id)")" = TIMEOUT
'

# One query for all jobs: no process of gpurun's waits with a pending job
# on the login node (there was a poller per job: 98 pending jobs made ~20
# scontrol calls a second), `status` asks squeue once for all of them,
# and with slurmctld hung it answers within one time limit
# (GPURUN_SLURM_TIMEOUT=3 here), saying why, and at once after that. The
# tools on the login node are stand-ins that count their calls.
CB=$TRASH/countbin && mkdir -p "$CB"
for t in squeue scontrol sacct sbatch; do
	printf '#!/bin/sh\necho %s >>%s\nexec %s "$@"\n' "$t" "$TRASH/calls" "$(command -v $t)" >"$CB/$t"
	chmod +x "$CB/$t"
done
start_sshd counted "SetEnv HOME=$LH PATH=$CB:$PATH GPURUN_SLURM_TIMEOUT=3 $(slurm_sshd_env)" && trust_sshd counted

test_expect_success 'pending jobs: no process waits with them; status asks squeue once for all' '
	cd "$P" && blocker=$(sbatch --parsable --gres=gpu:2 -o /dev/null --wrap "sleep $((S + 8))") &&
	slurm_wait_state "$blocker" RUNNING 60 &&
	ini "[train]" "command = true" "gpus = 1" && sed -i "s/^host = login\$/host = counted/" gpurun.ini &&
	for i in 1 2 3 4 5; do "$GPURUN" -q train -d >>$T/pend || return 1; done &&
	for i in $(seq 1 100); do pgrep -f "slurm-submit $LH" >/dev/null || break; sleep 0.1; done &&
	! pgrep -af "slurm-submit $LH" && sleep 2.5 &&
	: >$TRASH/calls && "$GPURUN" status --json >$T/all.json &&
	test "$(grep -c "\"state\": \"queued\"" $T/all.json)" -ge 5 &&
	cat $TRASH/calls >&2 && test "$(grep -c squeue $TRASH/calls)" = 1 &&
	test "$(grep -c -v squeue $TRASH/calls)" = 0
'

test_expect_success 'slurmctld hung: status answers within one time limit, saying so; at once after that' '
	cd "$P" && sleep 2.5 && kill -STOP "$(cat "$SLURM_DIR/run/slurmctld.pid")" &&
	t0=$(date +%s%N) && "$GPURUN" status --json >$T/down.json; rc=$?;
	t1=$(date +%s%N) && "$GPURUN" status --json >$T/down2.json; rc2=$?; t2=$(date +%s%N);
	kill -CONT "$(cat "$SLURM_DIR/run/slurmctld.pid")" &&
	echo "# status with slurmctld hung: $(( (t1 - t0) / 1000000 )) ms, then $(( (t2 - t1) / 1000000 )) ms" >&3 &&
	test $rc = 0 && test $rc2 = 0 &&
	test $(( (t1 - t0) / 1000000 )) -lt 6000 && test $(( (t2 - t1) / 1000000 )) -lt 2000 &&
	test_grep "controller does not answer" $T/down.json && test_grep "controller does not answer" $T/down2.json &&
	test "$(grep -c "\"state\": \"queued\"" $T/down2.json)" -ge 5 &&
	squeue -h -o %i | xargs -r scancel &&
	ini "[train]" "command = echo back" && sed -i "s/^host = login\$/host = counted/" gpurun.ini &&
	"$GPURUN" -q train >$T/back && test_grep -x back $T/back &&
	"$GPURUN" status --json "$(last_id)" >$T/back.json && test "$(json_field $T/back.json state)" = done &&
	! test_grep "does not answer" $T/back.json
' 3>&1

if why=$(slurm_missing_accounting); then
	test_skip 'status from sacct once scontrol forgot the job' "$why"
	test_done
fi

test_expect_success 'with accounting: status from sacct once scontrol forgot the job' '
	slurm_stop && SLURM_MIN_JOB_AGE=2 slurm_start --accounting &&
	cd "$P" && ini "[train]" "command = echo acct; exit 5" &&
	test_expect_code 5 "$GPURUN" -q train >$T/out && id=$(last_id) && n=$(sid "$id") &&
	for i in $(seq 1 1200); do
		scontrol -o show job "$n" >/dev/null 2>&1 || break; sleep 0.1
	done && ! scontrol -o show job "$n" >/dev/null 2>&1 &&
	echo "# scontrol forgot job $n after ~$i tenths of a second" >&3 &&
	for i in $(seq 1 300); do
		sacct -n -X -P -j "$n" -o State | grep -q FAILED && break; sleep 0.1
	done &&
	rm -f "$(find "$LH" -path "*/$id/.gpurun/slurm-state")" &&
	"$GPURUN" status --json "$id" >$T/acct.json && test "$(json_field $T/acct.json state)" = failed &&
	test "$(json_field $T/acct.json exit_code)" = 5 &&
	test "$(json_field $T/acct.json slurm_state)" = FAILED || { cat $T/acct.json >&2; false; }
' 3>&1

test_done
