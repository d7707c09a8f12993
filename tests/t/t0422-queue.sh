#!/bin/bash
# The box as a queued resource (issue 33), on the local transport with a
# recorded nvidia-smi of two GPUs: jobs that wait for GPUs start first
# come, first served (a job that needs both GPUs is not passed by later
# 1-GPU jobs); status and the log say each one's place and what it waits
# for; a waiting job whose supervisor is killed -9 stops standing in the
# way; a stopped waiter ends at once; [train] time_limit ends a job as
# timeout (exit 247), SIGKILL after stop_grace for one that ignores
# SIGTERM; [train] retries runs a failed command again, resuming from a
# persist path, and not a stopped one; --after and --after ID:ok.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R"
ini() {
	write_ini "$P" local local "$R"
	printf '[build]\ncommand =\n' >> "$P/gpurun.ini"
	for kv in "$@"; do printf '%s\n' "$kv"; done >> "$P/gpurun.ini"
}
wait_grep() {
	for _i in $(seq 1 $((${3:-20} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
# wait_state ID STATE [SECONDS]
wait_state() {
	for _i in $(seq 1 $((${3:-20} * 10))); do
		(cd "$P" && "$GPURUN" status --json "$1") >"$TRASH/ws.json" 2>/dev/null &&
			grep -q "\"state\": \"$2\"" "$TRASH/ws.json" && return 0
		sleep 0.1
	done
	say "job $1 did not reach $2:"; cat "$TRASH/ws.json" >&2; return 1
}
# started ID: the command's start, in ms (status --json's start)
started() {
	(cd "$P" && "$GPURUN" status --json "$1") | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["start_unix_ms"])'
}
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all
export GPURUN_NVIDIA_SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi
# A job that runs until its file appears: $TRASH/go-NAME.
HOLD='command = echo gpu=$CUDA_VISIBLE_DEVICES; while ! test -e '$TRASH'/go-$NAME; do sleep 0.05; done'

test_expect_success 'first come, first served: a 2-GPU job is not passed by later 1-GPU jobs' '
	cd "$P" && ini "[train]" "$HOLD" "gpus = 1" &&
	a=$("$GPURUN" -q train --env NAME=a --detach) && wait_state "$a" running &&
	b=$("$GPURUN" -q -o train.gpus=2 train --env NAME=b --detach) && wait_state "$b" queued &&
	c=$("$GPURUN" -q train --env NAME=c --detach) && wait_state "$c" queued &&
	d=$("$GPURUN" -q train --env NAME=d --detach) && wait_state "$d" queued &&
	sleep 1 &&
	# one GPU is free, yet c and d wait behind b
	"$GPURUN" status "$c" >sc && test_grep queued sc &&
	"$GPURUN" status >st &&
	test_grep "job $b is queued (1st in line): waiting for 2 GPUs held by job $a" st &&
	test_grep "job $c is queued (2nd in line): behind job $b, which waits for 2 GPUs" st &&
	test_grep "job $d is queued (3rd in line): behind job $c, which waits for 1 GPU" st &&
	"$GPURUN" status --json "$d" >sd && test_grep "\"queue_pos\": 3" sd &&
	"$GPURUN" logs "$c" >lc && test_grep "queued: 2nd, behind job $b" lc &&
	touch "$TRASH/go-a" && wait_state "$b" running &&
	"$GPURUN" logs "$b" >lb && test_grep -x "gpu=0,1" lb &&
	"$GPURUN" status "$c" >sc && test_grep queued sc &&
	touch "$TRASH/go-b" && wait_state "$c" running && wait_state "$d" running &&
	test "$(started "$b")" -le "$(started "$c")" && test "$(started "$c")" -le "$(started "$d")" &&
	touch "$TRASH/go-c" "$TRASH/go-d" && wait_state "$d" done
'

# The CPU time (ms) process PID has used.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"; }

test_expect_success 'waiting is sleeping: the jobs in line use no CPU while nothing changes' '
	cd "$P" && ini "[train]" "$HOLD" "gpus = 2" &&
	a=$("$GPURUN" -q train --env NAME=w1 --detach) && wait_state "$a" running &&
	b=$("$GPURUN" -q train --env NAME=w2 --detach) && wait_state "$b" queued &&
	c=$("$GPURUN" -q train --env NAME=w3 --detach) && wait_state "$c" queued &&
	sleep 1 && pb=$(pgrep -f "supervise .*/$b ") && pc=$(pgrep -f "supervise .*/$c ") &&
	b0=$(cpu_ms "$pb") && c0=$(cpu_ms "$pc") && sleep 3 &&
	b1=$(cpu_ms "$pb") && c1=$(cpu_ms "$pc") &&
	say "CPU in 3 s: the 1st in line $((b1 - b0)) ms, the 2nd $((c1 - c0)) ms" &&
	test $((b1 - b0)) -lt 100 && test $((c1 - c0)) -lt 100 &&
	touch "$TRASH/go-w1" "$TRASH/go-w2" "$TRASH/go-w3" && wait_state "$c" done
'

test_expect_success 'a waiter whose supervisor is killed -9 no longer stands in the way; a stopped waiter ends at once' '
	cd "$P" && ini "[train]" "$HOLD" "gpus = 2" &&
	a=$("$GPURUN" -q train --env NAME=e --detach) && wait_state "$a" running &&
	b=$("$GPURUN" -q train --env NAME=f --detach) && wait_state "$b" queued &&
	c=$("$GPURUN" -q train --env NAME=g --detach) && wait_state "$c" queued &&
	d=$("$GPURUN" -q train --env NAME=h --detach) && wait_state "$d" queued &&
	sup=$(pgrep -f "supervise .*/$b ") &&
	test -n "$sup" && kill -9 $sup && wait_state "$b" lost &&
	"$GPURUN" status >st && test_grep "job $c is queued (1st in line)" st &&
	start=$(date +%s%N) && "$GPURUN" -q stop "$c" && end=$(date +%s%N) &&
	test $(( (end - start) / 1000000 )) -lt 3000 &&
	"$GPURUN" status "$c" >sc && test_grep stopped sc &&
	"$GPURUN" status >st && test_grep "job $d is queued (1st in line)" st &&
	touch "$TRASH/go-e" && wait_state "$d" running && touch "$TRASH/go-h" && wait_state "$d" done &&
	! ls "$GPURUN_LOCK_DIR"/gpurun-locks-*/queue-* 2>/dev/null
'

test_expect_success 'time_limit: SIGTERM, the job ends timeout, exit 247; SIGKILL after stop_grace when ignored' '
	cd "$P" && ini "[train]" "command = echo begin; sleep 30; echo never" "time_limit = 1s" &&
	test_expect_code 247 "$GPURUN" train >out 2>err &&
	test_grep "time limit reached (1s)" out && ! grep never out &&
	test_grep "reached its time limit (\[train\] time_limit = 1s)" err &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && "$GPURUN" status --json "$id" >js &&
	test_grep "\"state\": \"timeout\"" js && test_grep "\"time_limit_s\": 1" js &&
	ini "[train]" "command = trap \"echo ignored\" TERM; while :; do sleep 0.1; done; : t0422-$$" "time_limit = 1s" "stop_grace = 1" &&
	start=$(date +%s) && test_expect_code 247 "$GPURUN" train >out 2>err && end=$(date +%s) &&
	test_grep -x ignored out && test $((end - start)) -lt 10 &&
	! pgrep -af "t0422-$$"
'

test_expect_success 'retries: a failed command runs again and resumes from a persist path; status counts the tries' '
	cd "$P" && mkdir -p "$R" &&
	ini "[train]" "command = n=\$(cat state/n 2>/dev/null || echo 0); n=\$((n+1)); echo \$n > state/n; echo try \$n; test \$n -ge 3" \
		"persist = state/" "retries = 5" &&
	"$GPURUN" train >out 2>err &&
	test_grep -x "try 3" out && test_grep "running it again (retry 2 of 5)" out &&
	! test_grep "try 4" out &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && "$GPURUN" status --json "$id" >js &&
	test_grep "\"state\": \"done\"" js && test_grep "\"tries\": 3" js &&
	ini "[train]" "command = echo try; exit 2" "retries = 1" &&
	test_expect_code 2 "$GPURUN" train >out 2>err && test "$(grep -c -x try out)" = 2
'

test_expect_success 'retries: a stopped job is not run again' '
	cd "$P" && ini "[train]" "command = echo try; sleep 30" "retries = 3" &&
	a=$("$GPURUN" -q train --detach) && wait_state "$a" running &&
	"$GPURUN" -q -o train.stop_grace=1 stop "$a" && sleep 1.5 &&
	"$GPURUN" logs "$a" >la && test "$(grep -c -x try la)" = 1 &&
	"$GPURUN" status "$a" >sa && test_grep stopped sa
'

test_expect_success '--after: a job starts when the other ends; :ok only when it ended well, else it ends cancelled' '
	cd "$P" && ini "[train]" "command = echo run \$NAME; while ! test -e $TRASH/go-\$NAME; do sleep 0.05; done; exit \${CODE:-0}" &&
	a=$("$GPURUN" -q train --name dep-a --env NAME=p --env CODE=3 --detach) && wait_state "$a" running &&
	b=$("$GPURUN" -q train --after dep-a --env NAME=q --detach) &&
	c=$("$GPURUN" -q train --after "$a:ok" --env NAME=r --detach) &&
	wait_state "$b" queued && wait_state "$c" queued &&
	"$GPURUN" status >st && test_grep "job $b is queued: waiting for job $a to end (it is running)" st &&
	test_grep "job $c is queued: waiting for job $a to end well (it is running)" st &&
	"$GPURUN" status --json "$b" >jb && test_grep "\"after\": \"$a\"" jb &&
	"$GPURUN" status --json "$c" >jc && test_grep "\"after\": \"$a:ok\"" jc &&
	touch "$TRASH/go-p" "$TRASH/go-q" && wait_state "$a" failed &&
	test_expect_code 0 "$GPURUN" logs -f "$b" >lb && test_grep -x "run q" lb &&
	test_grep "job $a ended (failed): starting" lb &&
	test_expect_code 1 "$GPURUN" logs -f "$c" >lc 2>errc &&
	test_grep "cancelled: job $a, which it was to start after with :ok, ended failed (exit 3)" lc &&
	! test_grep -x "run r" lc &&
	"$GPURUN" status "$c" >sc && test_grep cancelled sc &&
	test_grep "was cancelled before it started: job $a" errc
'

test_expect_success '--after ID:ok of a job that ends well starts; a stop of the waiter ends it at once' '
	cd "$P" && ini "[train]" "command = echo run \$NAME; while ! test -e $TRASH/go-\$NAME; do sleep 0.05; done" &&
	a=$("$GPURUN" -q train --env NAME=s --detach) && wait_state "$a" running &&
	b=$("$GPURUN" -q train --after "$a:ok" --env NAME=t --detach) &&
	c=$("$GPURUN" -q train --after "$a" --env NAME=u --detach) && wait_state "$c" queued &&
	"$GPURUN" -q stop "$c" && "$GPURUN" status "$c" >sc && test_grep stopped sc &&
	touch "$TRASH/go-s" "$TRASH/go-t" && "$GPURUN" logs -f "$b" >lb && test_grep -x "run t" lb &&
	"$GPURUN" logs "$c" >lc && ! grep -q "run u" lc
'

test_done
