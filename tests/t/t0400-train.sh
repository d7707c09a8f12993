#!/bin/bash
# gpurun train / logs / status / stop on the local transport: exit status
# passthrough, a failed build ends the job before its command, output as
# it is written, the job's snapshot and own build folder, stop reaching
# grandchildren, GPU choice with a recorded nvidia-smi, a lost supervisor,
# and the .gpurun/jobs cache.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R"
# ini [KEY=VALUE...]: gpurun.ini for the local host, sections as given.
# No build unless a case asks for one.
ini() {
	write_ini "$P" local local "$R"
	case " $* " in *" [build] "*) ;; *) printf '[build]\ncommand =\n' >> "$P/gpurun.ini" ;; esac
	for kv in "$@"; do printf '%s\n' "$kv"; done >> "$P/gpurun.ini"
}
# job_script NAME BODY: a script in the remote project (the job's cwd).
job_script() { printf '%s\n' "$2" > "$R/$1"; }
# wait_grep PATTERN FILE [SECONDS]
wait_grep() {
	for _i in $(seq 1 $((${3:-20} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
jobs_root() { echo "$HOME/.cache/gpurun/jobs"; }
# Whatever a failing case left running is stopped at exit.
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all
S=$$ # unique sleep lengths, so pgrep sees only this run's

test_expect_success 'exit status passes through: 0, 1, 137, killed by a signal' '
	cd "$P" &&
	ini "[train]" "command = exit 0" && test_expect_code 0 "$GPURUN" -q train &&
	ini "[train]" "command = exit 1" && test_expect_code 1 "$GPURUN" -q train &&
	ini "[train]" "command = exit 137" && test_expect_code 137 "$GPURUN" -q train &&
	ini "[train]" "command = sleep 0.2; kill -KILL \$\$" && test_expect_code 137 "$GPURUN" -q train &&
	ini "[train]" "command = kill -TERM \$\$" && test_expect_code 143 "$GPURUN" -q train
'

test_expect_success 'the log has stdout and stderr; train prints it live' '
	cd "$P" && ini "[train]" "command = echo out-line; echo err-line >&2; echo \$GPURUN_JOB_ID" &&
	"$GPURUN" train >out 2>err && test_grep -x out-line out && test_grep -x err-line out &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && test_grep -x "$id" out &&
	test_grep "started job $id" err && test_grep "exited with status 0" err
'

# Issue 36: the start asks for the log too (JOB_START_FOLLOW), so the
# first line costs no round trip of its own; a lost connection, detach and
# logs -f still ask with JOB_LOG.
test_expect_success 'train: the log comes with the start, not by a JOB_LOG of its own' '
	cd "$P" && ini "[train]" "command = echo first; echo second" &&
	{ GPURUN_TRACE=1 "$GPURUN" train >out 2>err || { cat err; false; }; } &&
	printf "first\nsecond\n" >want && { test_cmp want out || { cat err; false; }; } &&
	test_grep "job: JOB_START, its log to follow" err && test_grep "job: first log bytes" err &&
	{ ! grep "job: JOB_LOG" err || { say "a JOB_LOG of its own; the trace was:"; cat err; false; }; } &&
	GPURUN_TRACE=1 "$GPURUN" train --detach >id 2>err &&
	test_grep "job: JOB_START\$" err && ! grep "its log to follow" err &&
	GPURUN_TRACE=1 "$GPURUN" logs -f "$(cat id)" >out 2>err && test_cmp want out &&
	test_grep "job: JOB_LOG from byte 0" err
'

test_expect_success 'a failed build ends the job with its status; the command does not run' '
	cd "$P" &&
	ini "[build]" "command = echo compiling; echo broken >&2; exit 4" "[train]" "command = touch $TRASH/ran" &&
	test_expect_code 4 "$GPURUN" train >out 2>err &&
	test_grep compiling out && test_grep broken out && test_grep "build failed with status 4" err &&
	! test -e "$TRASH/ran" && id=$(head -n1 .gpurun/jobs | cut -f1) &&
	"$GPURUN" status --json "$id" >js &&
	python3 -c "import json; j = json.load(open(\"js\"))[\"jobs\"][0]; assert j[\"state\"] == \"failed\" and j[\"phase\"] == \"build\" and j[\"exit_code\"] == 4, j"
'

test_expect_success 'the build runs before the job, in the job'"'"'s own folder' '
	cd "$P" && ini "[build]" "command = pwd > built-here" "[train]" "command = cat built-here; pwd" &&
	"$GPURUN" -q train >out && id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test $(grep -c "/$id\$" out) = 2 && ! test -e "$R/built-here"
'

test_expect_success 'a block-buffering program still shows each line as it is written' '
	cd "$P" &&
	job_script buffered.py "import time
print(\"first\")
time.sleep(4)
print(\"second\")" &&
	ini "[train]" "command = python3 buffered.py" &&
	id=$("$GPURUN" -q train --detach) &&
	rm -f live && ( "$GPURUN" logs -f "$id" >live 2>&1 & echo $! >pid ) &&
	wait_grep first live 3 && ! grep -q second live &&
	wait_grep second live 10 && sleep 0.5
	rc=$?; kill $(cat pid) 2>/dev/null; return $rc
'

test_expect_success 'detach prints the id; logs -f reattaches and exits with the status' '
	cd "$P" && ini "[train]" "command = echo one; sleep 1; echo two; exit 5" &&
	"$GPURUN" train --detach >id 2>err && id=$(cat id) &&
	test_grep "gpurun logs -f $id" err &&
	test_expect_code 5 "$GPURUN" logs -f "$id" >out &&
	printf "one\ntwo\n" >want && test_cmp want out &&
	test_grep "^$id	failed	" .gpurun/jobs
'

test_expect_success 'logs: whole log, --tail, a unique prefix, and the latest by default' '
	cd "$P" && ini "[train]" "command = seq 1 50" && "$GPURUN" -q train >/dev/null &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	"$GPURUN" logs >all && test $(wc -l <all) = 50 &&
	"$GPURUN" logs --tail 3 >t && printf "48\n49\n50\n" >want && test_cmp want t &&
	"$GPURUN" logs "${id%????}" >p && test_cmp all p
'

test_expect_success 'status lists jobs; --json parses' '
	cd "$P" && "$GPURUN" status >st && test_grep "^JOB " st && test_grep "done" st &&
	"$GPURUN" status --json >js && python3 -m json.tool js >/dev/null &&
	python3 -c "import json,sys; d=json.load(open(\"js\")); assert d[\"jobs\"][0][\"state\"]==\"done\", d; assert d[\"nvidia_smi\"] is False"
'

test_expect_success 'stop ends the whole tree: children, one that called setsid, one that ignores TERM' '
	cd "$P" &&
	job_script tree.sh "sleep ${S}1 &
setsid sleep ${S}2 &
env -i setsid sleep ${S}3 &
sh -c \"trap \\\"\\\" TERM; sleep ${S}4\" &
echo started
wait" &&
	ini "[train]" "command = sh tree.sh" "stop_grace = 1" &&
	id=$("$GPURUN" -q train --detach) &&
	rm -f live && { "$GPURUN" logs -f "$id" >live 2>&1 & } && lpid=$! &&
	wait_grep started live && sleep 0.3 &&
	test $(pgrep -fc "^sleep ${S}[1-4]\$") = 4 &&
	"$GPURUN" stop "$id" 2>err && test_grep "SIGTERM to" err && test_grep "SIGKILL" err &&
	! pgrep -f "^sleep ${S}[1-4]\$" &&
	{ wait $lpid || :; } && "$GPURUN" status "$id" >st && test_grep "stopped" st
'

test_expect_success 'stop reports a process still holding a GPU (recorded nvidia-smi)' '
	cd "$P" && export GPURUN_NVIDIA_SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi &&
	export FAKE_SMI_APPS=$TRASH/apps.csv &&
	ini "[train]" "command = echo \$\$, GPU-6f0e5b2a-1c1d-4a1e-9a0e-2b7f0c6a0002, 1000, python > $TRASH/apps.csv; exec sleep 1000" "gpus = all" &&
	id=$("$GPURUN" -q train --detach) && wait_grep GPU "$TRASH/apps.csv" &&
	"$GPURUN" status >st && test_grep "pid [0-9]* python, 1000 MiB, job $id" st &&
	test_expect_code 1 "$GPURUN" stop "$id" 2>err &&
	test_grep "still holds a GPU" err
'

test_expect_success 'two jobs asking for one GPU each get different GPUs; a third waits (queued)' '
	cd "$P" && export GPURUN_NVIDIA_SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi && rm -f "$TRASH/apps.csv" &&
	rm -f "$TRASH/go" &&
	ini "[train]" "command = echo gpu=\$CUDA_VISIBLE_DEVICES; while ! test -e $TRASH/go; do sleep 0.1; done" "gpus = 1" &&
	a=$("$GPURUN" -q train --detach) && b=$("$GPURUN" -q train --detach) && c=$("$GPURUN" -q train --detach) &&
	sleep 1 &&
	"$GPURUN" logs "$a" >la && "$GPURUN" logs "$b" >lb &&
	test_grep -x "gpu=[01]" la && test_grep -x "gpu=[01]" lb && ! test_cmp la lb &&
	"$GPURUN" status "$c" >sc && test_grep queued sc && "$GPURUN" logs "$c" >lc && test_grep "queued: 1st, waiting for 1 GPU held by job" lc &&
	d=$("$GPURUN" -q train --detach) && sleep 0.5 && "$GPURUN" stop "$d" 2>stoperr &&
	"$GPURUN" status "$d" >sd && { test_grep stopped sd || { cat stoperr; false; }; } &&
	"$GPURUN" logs "$d" >ld && test_grep "stopped before it started" ld &&
	"$GPURUN" status --json >js && python3 -m json.tool js >/dev/null &&
	test_grep "\"job\": \"$a\"" js &&
	touch "$TRASH/go" &&
	"$GPURUN" logs -f "$c" >lc && test_grep -x "gpu=[01]" lc
'

test_expect_success 'the job runs the code it was started with, whatever syncs do meanwhile' '
	cd "$P" && unset GPURUN_NVIDIA_SMI &&
	echo v1 >"$R/data.txt" && echo v1 >"$R/inplace.txt" &&
	head -c 3000000 /dev/zero | tr "\0" a >"$R/big.bin" &&
	ini "[train]" "command = while ! test -e $TRASH/go2; do sleep 0.1; done; cat data.txt inplace.txt; head -c 3 big.bin; echo" &&
	id=$("$GPURUN" -q train --detach) && sleep 0.5 &&
	echo v2 >"$R/data.new" && mv "$R/data.new" "$R/data.txt" &&
	echo v2 >"$R/inplace.txt" &&
	head -c 3000000 /dev/zero | tr "\0" b >"$R/big.new" && mv "$R/big.new" "$R/big.bin" &&
	touch "$TRASH/go2" && "$GPURUN" logs -f "$id" >out &&
	printf "v1\nv1\naaa\n" >want && test_cmp want out
'

test_expect_success 'two jobs build at once, each in its own folder; the second says the first runs' '
	cd "$P" && rm -f "$TRASH/go5" &&
	ini "[build]" "command = echo \$GPURUN_JOB_ID > built.txt" \
		"[train]" "command = while ! test -e $TRASH/go5; do sleep 0.1; done; cat built.txt" &&
	a=$("$GPURUN" -q train --detach) && b=$("$GPURUN" train --detach 2>err) &&
	test_grep "job $a of this project is .* this one builds and runs in its own folder" err &&
	touch "$TRASH/go5" && "$GPURUN" logs -f "$a" >oa && "$GPURUN" logs -f "$b" >ob &&
	test_grep -x "$a" oa && test_grep -x "$b" ob && ! test -e "$R/built.txt"
'

test_expect_success 'a job waiting for another'"'"'s setup says so, and stops at once when asked' '
	cd "$P" && rm -f "$TRASH/go6" &&
	ini "[setup]" "command = while ! test -e $TRASH/go6; do sleep 0.1; done" "[train]" "command = echo ran" &&
	a=$("$GPURUN" -q train --detach) && sleep 0.5 && b=$("$GPURUN" -q train --detach) &&
	for i in $(seq 1 100); do "$GPURUN" status "$b" >st && grep -q queued st && break; sleep 0.1; done &&
	test_grep "queued" st && "$GPURUN" status "$a" >sa && test_grep " setup " sa &&
	"$GPURUN" logs "$b" >lb && test_grep "waiting for job $a.s setup to finish" lb &&
	"$GPURUN" -q -o train.stop_grace=1 stop "$b" && "$GPURUN" status "$b" >sb && test_grep stopped sb &&
	touch "$TRASH/go6" && "$GPURUN" logs -f "$a" >la && test_grep -x ran la
'

test_expect_success 'persistent paths: shared by jobs, made where missing, never through a symlink' '
	cd "$P" && ini "[train]" "command = echo \$GPURUN_JOB_ID >>state/ids; cat state/ids | wc -l" \
		"persist = state/ cache/x/" &&
	"$GPURUN" -q train >o1 && "$GPURUN" -q train >o2 && test "$(cat o2)" = 2 &&
	test -d "$R/state" && test -d "$R/cache/x" && test $(wc -l <"$R/state/ids") = 2 &&
	mkdir -p "$TRASH/elsewhere" && ln -s "$TRASH/elsewhere" "$R/link" &&
	ini "[train]" "command = true" "persist = link/cache/" &&
	test_expect_code 1 "$GPURUN" train 2>err && test_grep "a symlink on the way is not followed" err &&
	! test -e "$TRASH/elsewhere/cache" && rm "$R/link"
'

test_expect_success 'a supervisor killed with -9 leaves the job lost (exit 248), not hanging' '
	cd "$P" && ini "[train]" "command = sleep 1000" &&
	id=$("$GPURUN" -q train --detach) && sleep 0.5 &&
	sup=$(pgrep -f "supervise .*$id") && kill -9 $sup &&
	test_expect_code 248 "$GPURUN" logs -f "$id" &&
	"$GPURUN" status "$id" >st && test_grep lost st
	rc=$?; "$GPURUN" stop "$id" 2>/dev/null; return $rc
'

test_expect_success 'a lost job whose processes ignore SIGHUP: rm, prune and keep refuse; stop reaches them, frees the GPU' '
	cd "$P" && export GPURUN_NVIDIA_SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi && rm -f "$TRASH/apps.csv" &&
	ini "[train]" "command = trap \"\" HUP; sleep ${S}7" "gpus = 1" &&
	id=$("$GPURUN" -q train --detach) &&
	for i in $(seq 1 100); do pgrep -f "^sleep ${S}7\$" >/dev/null && break; sleep 0.1; done &&
	sup=$(pgrep -f "supervise .*$id") && kill -9 $sup && sleep 0.5 &&
	pgrep -f "^sleep ${S}7\$" >/dev/null &&
	"$GPURUN" status "$id" >st && test_grep "^$id  lost " st &&
	test_grep "job $id is lost: supervisor gone, [0-9]* process.* still running (pid [0-9]* " st &&
	"$GPURUN" status >sa && test_grep "^[01] .* $id\$" sa &&
	test_expect_code 1 "$GPURUN" rm "$id" 2>err &&
	test_grep "job $id has processes still running (pid [0-9]* .*); stop it first: gpurun stop $id" err &&
	{ "$GPURUN" prune --keep 0 2>err || :; } && "$GPURUN" status "$id" >st && test_grep "^$id  lost " st &&
	"$GPURUN" -q -o jobs.keep=1 -o train.stop_grace=0 train --detach -- true >/dev/null &&
	sleep 0.5 && "$GPURUN" status "$id" >st && test_grep "^$id  lost " st &&
	"$GPURUN" -o train.stop_grace=1 stop "$id" 2>err && ! pgrep -f "^sleep ${S}7\$" &&
	"$GPURUN" status >sa && ! grep "^[01] .* $id\$" sa &&
	"$GPURUN" rm "$id" 2>err && test_grep "removed" err
	rc=$?; unset GPURUN_NVIDIA_SMI; return $rc
'

test_expect_success 'rm -rf of the jobs folder during a job: stop still reaches its processes by their id' '
	cd "$P" && export GPURUN_NVIDIA_SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi && rm -f "$TRASH/apps.csv" &&
	ini "[train]" "command = trap \"\" HUP; sleep ${S}8" "gpus = 1" &&
	id=$("$GPURUN" -q train --detach) &&
	for i in $(seq 1 100); do pgrep -f "^sleep ${S}8\$" >/dev/null && break; sleep 0.1; done &&
	sup=$(pgrep -f "supervise .*$id") && kill -9 $sup && rm -rf "$(jobs_root)"/*/"$id" &&
	! ls -d "$(jobs_root)"/*/"$id" && "$GPURUN" status "$id" >s1 2>&1 &&
	test_grep "its folder on the host is gone, 2 processes still running" s1 &&
	! "$GPURUN" logs "$id" 2>err && test_grep "job $id: its folder on the host is gone" err &&
	test_grep "gpurun stop $id. ends them" err &&
	pgrep -f "^sleep ${S}8\$" >/dev/null && "$GPURUN" status >sa && test_grep "^[01] .* $id\$" sa &&
	test_grep "^$id  lost " sa && test_grep "job $id is lost: its folder on the host is gone, 2 processes still running (pid [0-9]* " sa &&
	"$GPURUN" -o train.stop_grace=1 stop "$id" 2>err && test_grep "stopped job $id: SIGTERM to 2 processes" err &&
	test_grep "its folder on the host is gone" err && ! pgrep -f "^sleep ${S}8\$" &&
	"$GPURUN" status >sa && ! grep "^[01] .* $id\$" sa &&
	! "$GPURUN" stop "$id" 2>err && test_grep "no job .$id. on the host" err ||
		{ unset GPURUN_NVIDIA_SMI; return 1; }
	unset GPURUN_NVIDIA_SMI
'

test_expect_success 'a stop longer than GPURUN_IO_TIMEOUT is waited for: the busy agent sends keepalives' '
	cd "$P" && ini "[train]" "command = trap \"\" TERM; echo up; while :; do sleep 0.1; done" &&
	id=$("$GPURUN" -q train --detach) && sleep 1 &&
	GPURUN_IO_TIMEOUT=7 "$GPURUN" -o train.stop_grace=12 stop "$id" 2>err &&
	test_grep "SIGKILL" err && "$GPURUN" status "$id" >st && test_grep "^$id  stopped " st
'

test_expect_success 'artifacts: pulled at the end, then only what changed travels' '
	cd "$P" &&
	ini "[train]" "command = echo a >\$GPURUN_JOB_DIR/metrics.csv; mkdir -p \$GPURUN_JOB_DIR/ckpt; echo c >\$GPURUN_JOB_DIR/ckpt/c.bin; echo x >\$GPURUN_JOB_DIR/skip.txt" \
		"[artifacts]" "pull = *.csv ckpt" &&
	"$GPURUN" train >out 2>err && id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test_grep "pulled 2 artifacts" err &&
	test "$(cat runs/$id/metrics.csv)" = a && test "$(cat runs/$id/ckpt/c.bin)" = c && ! test -e runs/$id/skip.txt &&
	"$GPURUN" pull "$id" 2>err && test_grep "up to date (2 files)" err &&
	jd=$(ls -d "$(jobs_root)"/*/"$id") && echo b >"$jd/metrics.csv" &&
	"$GPURUN" pull "$id" 2>err && test_grep "pulled 1 artifact .*; 1 unchanged" err &&
	test "$(cat runs/$id/metrics.csv)" = b
'

test_expect_success 'artifacts are pulled while the job runs, every [artifacts] interval' '
	cd "$P" &&
	ini "[train]" "command = echo 1 >\$GPURUN_JOB_DIR/ckpt.bin; while ! test -e $TRASH/go3; do sleep 0.1; done" \
		"[artifacts]" "pull = ckpt.bin" "interval = 1" &&
	( "$GPURUN" train >out 2>err & ) &&
	for i in $(seq 1 50); do ls runs/*/ckpt.bin >/dev/null 2>&1 && break; sleep 0.1; done &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && test -f "runs/$id/ckpt.bin" &&
	"$GPURUN" status "$id" >st && test_grep running st && touch "$TRASH/go3"
'

test_expect_success 'without a terminal, Ctrl-C detaches (exit 0); the job keeps running' '
	cd "$P" && rm -f "$TRASH/go4" &&
	ini "[train]" "command = echo up; while ! test -e $TRASH/go4; do sleep 0.1; done; echo end" &&
	rm -f out err && { "$GPURUN" train </dev/null >out 2>err & } && tpid=$! &&
	wait_grep up out && kill -INT $tpid && { wait $tpid; rc=$?; } &&
	test $rc = 0 && test_grep "detached from job" err && test_grep "gpurun logs -f" err &&
	id=$(sed -n "s/.*detached from job \([0-9a-f-]*\);.*/\1/p" err) &&
	"$GPURUN" status "$id" >st && test_grep running st &&
	touch "$TRASH/go4" && "$GPURUN" logs -f "$id" >out2 && test_grep -x end out2
'

test_expect_success '--stop-on-interrupt: Ctrl-C stops the job (exit 249)' '
	cd "$P" && ini "[train]" "command = echo up; sleep 1000" "stop_grace = 1" &&
	rm -f out err && { "$GPURUN" train --stop-on-interrupt </dev/null >out 2>err & } && tpid=$! &&
	wait_grep up out && kill -INT $tpid && { wait $tpid; rc=$?; } &&
	test $rc = 249 && test_grep "stopping job" err &&
	id=$(sed -n "s/.*stopping job \([0-9a-f-]*\) .*/\1/p" err) &&
	"$GPURUN" status "$id" >st && test_grep stopped st
'

test_done
