#!/bin/bash
# [train] output over a real sshd (libssh2): the default gives a step a
# terminal for stdout and stderr; output = pipe gives it one pipe for both
# (the pty stays its controlling terminal), in the order written,
# PYTHONUNBUFFERED=1 unless the job's env sets it (python's prints stream
# before it ends), and stop and Ctrl-C still end the job and its children.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
RH=$TRASH/gpuhost-home
wait_grep() {
	for _i in $(seq 1 $((${3:-30} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
# ini OUTPUT COMMAND [KEY=VALUE...]: the project on the sshd ("" OUTPUT:
# the key left out, the default).
ini() {
	write_ini "$P" gpuhost libssh2 proj
	printf '[build]\ncommand =\n[artifacts]\npull =\n[train]\ncommand = %s\nstop_grace = 1\n' "$2" >>"$P/gpurun.ini"
	[ -z "$1" ] || printf 'output = %s\n' "$1" >>"$P/gpurun.ini"
	shift 2
	for kv in "$@"; do printf '%s\n' "$kv"; done >>"$P/gpurun.ini"
}
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all
S=$$ # unique sleep lengths, so pgrep sees only this run's

test_expect_success 'start a real sshd on loopback; the project' '
	start_sshd gpuhost && trust_sshd gpuhost && mkdir -p "$P" &&
	cat >"$P/what.py" <<-\EOF &&
	import os, sys
	print("tty", int(os.isatty(1)), int(os.isatty(2)), os.environ.get("PYTHONUNBUFFERED", "-"))
	EOF
	cat >"$P/mixed.py" <<-\EOF &&
	import sys
	for i in range(300):
	    print("out", i)
	    print("err", i, file=sys.stderr)
	with open("/dev/tty", "w") as t:
	    t.write("via the terminal\n")
	EOF
	cat >"$P/stream.py" <<-\EOF &&
	import os, sys, time
	print("ready")
	for _ in range(1200):
	    if os.path.exists(sys.argv[1]):
	        break
	    time.sleep(0.05)
	print("done")
	EOF
	printf "sleep ${S}1 &\nsh -c \"trap \\\\\"\\\\\" TERM; sleep ${S}2\" &\necho started\nwait\n" >"$P/tree.sh"
'

test_expect_success 'default (pty): stdout and stderr are a terminal, PYTHONUNBUFFERED not set' '
	cd "$P" && ini "" "python3 what.py" && "$GPURUN" -q train >out &&
	echo "tty 1 1 -" >want && test_cmp want out
'

test_expect_success 'output = pipe: stdout and stderr are not a terminal; PYTHONUNBUFFERED=1' '
	cd "$P" && ini pipe "python3 what.py" && "$GPURUN" -q train >out &&
	echo "tty 0 0 1" >want && test_cmp want out
'

test_expect_success 'output = pipe: stdout and stderr in the order written; /dev/tty still works' '
	cd "$P" && ini pipe "python3 mixed.py" && "$GPURUN" -q train >out &&
	for i in $(seq 0 299); do echo "out $i"; echo "err $i"; done >want &&
	echo "via the terminal" >>want && test_cmp want out
'

test_expect_success 'output = pipe: a large output arrives whole, in order' '
	cd "$P" && ini pipe "seq 1 300000" && "$GPURUN" -q train >out &&
	seq 1 300000 >want && test_cmp want out
'

test_expect_success 'output = pipe: a python script'"'"'s prints stream before it ends' '
	cd "$P" && rm -f "$TRASH/go1" out && ini pipe "python3 stream.py $TRASH/go1" &&
	{ "$GPURUN" -q train >out 2>err & } && tpid=$! &&
	wait_grep ready out && ! grep -q done out && touch "$TRASH/go1" &&
	wait $tpid && printf "ready\ndone\n" >want && test_cmp want out
'

test_expect_success 'output = pipe: the job'"'"'s env keeps its own PYTHONUNBUFFERED' '
	cd "$P" && ini pipe "python3 what.py" "env = PYTHONUNBUFFERED=7" && "$GPURUN" -q train >out &&
	echo "tty 0 0 7" >want && test_cmp want out
'

test_expect_success 'output = pipe: stop ends the job and its children (one ignores TERM)' '
	cd "$P" && ini pipe "sh tree.sh" &&
	id=$("$GPURUN" -q train --detach) &&
	rm -f live && { "$GPURUN" logs -f "$id" >live 2>&1 & } && lpid=$! &&
	wait_grep started live &&
	for _i in $(seq 1 100); do test "$(pgrep -fc "^sleep ${S}[12]\$")" = 2 && break; sleep 0.1; done &&
	test "$(pgrep -fc "^sleep ${S}[12]\$")" = 2 &&
	"$GPURUN" stop "$id" 2>err && test_grep "SIGTERM to" err &&
	! pgrep -f "^sleep ${S}[12]\$" &&
	{ wait $lpid || :; } && "$GPURUN" status "$id" >st && test_grep stopped st
'

test_expect_success 'output = pipe: Ctrl-C with --stop-on-interrupt stops the job (exit 249)' '
	cd "$P" && ini pipe "echo up; sleep ${S}3" &&
	rm -f out err && { "$GPURUN" train --stop-on-interrupt </dev/null >out 2>err & } && tpid=$! &&
	wait_grep up out && kill -INT $tpid && { wait $tpid; rc=$?; } &&
	test $rc = 249 && test_grep "stopping job" err && ! pgrep -f "^sleep ${S}3\$" &&
	id=$(sed -n "s/.*stopping job \([0-9a-f-]*\) .*/\1/p" err) &&
	"$GPURUN" status "$id" >st && test_grep stopped st
'

test_expect_success 'an unknown output is refused where the config is read (exit 253)' '
	cd "$P" && ini bogus "true" && test_expect_code 253 "$GPURUN" -q train 2>err &&
	test_grep "invalid value .bogus. for .output. in \[train\]" err
'

test_done
