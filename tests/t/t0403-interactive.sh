#!/bin/bash
# Ctrl-C while attached, on a terminal (a pty the test drives,
# tests/helpers/ptydrive.py): train asks "stop the job or detach?" and
# takes one key, no Enter, while the log keeps flowing below the question.
# d detaches (exit 0, the job keeps running), s stops it (exit 249), a
# second Ctrl-C leaves at once (exit 249) without a "^C" in the log; no
# key typed meanwhile is left for the shell, and the terminal's modes are
# restored on every path.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R"
write_ini "$P" local local "$R"
printf '[build]\ncommand =\n[train]\ncommand = echo up; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.3; done\nstop_grace = 1\n' >>"$P/gpurun.ini"
stop_all() {
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" { print $1 }' |
		while read -r j; do "$GPURUN" -q stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

term() { python3 "$TOP/tests/helpers/ptydrive.py" "$@"; }
latest() { head -n1 "$P/.gpurun/jobs" | cut -f1; }

test_expect_success 'Ctrl-C, then d alone: detached at once, the log flowed meanwhile, no stray key' '
	cd "$P" && { term "wait:up|send:\x03|wait:stop the job or detach? [s/d]|waitnew:tick|waitnew:tick|send:d" -- "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 0 && test_grep "detached from job" out && test_grep "gpurun logs -f" out &&
	test_grep "ptydrive: stray 0 " out && test_grep "ptydrive: modes restored" out &&
	! grep -q "\^C" out &&
	"$GPURUN" status "$(latest)" >st && test_grep running st
'

test_expect_success 'keys typed after the answer do not reach the shell either' '
	cd "$P" && { term "wait:up|send:\x03|wait:[s/d]|send:dls -l\r" -- "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 0 && test_grep "detached from job" out &&
	test_grep "ptydrive: stray 0 " out && test_grep "ptydrive: modes restored" out
'

test_expect_success 'Ctrl-C, then s: the job is stopped (exit 249)' '
	cd "$P" && { term "wait:up|send:\x03|wait:[s/d]|send:s" -- "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 249 && test_grep "stopping job" out &&
	test_grep "ptydrive: modes restored" out && test_grep "ptydrive: stray 0 " out &&
	"$GPURUN" status "$(latest)" >st && test_grep stopped st
'

test_expect_success 'other keys are ignored; the question stays until s or d' '
	cd "$P" && { term "wait:up|send:\x03|wait:[s/d]|send:xyz\r|waitnew:tick|send:d" -- "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 0 && test_grep "detached from job" out && test_grep "ptydrive: stray 0 " out
'

test_expect_success 'a second Ctrl-C leaves at once (exit 249), no ^C in the log, the job still runs' '
	cd "$P" && { term "wait:up|send:\x03|wait:[s/d]|waitnew:tick|send:\x03" -- "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 249 && test_grep "left job" out && ! grep -q "\^C" out &&
	test_grep "ptydrive: modes restored" out && test_grep "ptydrive: stray 0 " out &&
	"$GPURUN" status "$(latest)" >st && test_grep running st
'

test_expect_success 'the terminal is restored when the job ends while the question waits' '
	S=$TRASH/short && write_ini "$S" local local "$TRASH/rshort" && mkdir -p "$TRASH/rshort" &&
	printf "[build]\ncommand =\n[train]\ncommand = echo up; sleep 2; echo bye\n" >>"$S/gpurun.ini" &&
	cd "$S" && { term "wait:up|send:\x03|wait:[s/d]|wait:bye|sleep:1" -- "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 0 && test_grep "ptydrive: modes restored" out &&
	test_grep "ptydrive: stray 0 " out
'

test_done
