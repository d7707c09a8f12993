#!/bin/bash
# Jobs over a real sshd (transport = openssh): the job outlives kill -9 of
# gpurun and of its connection; a follower whose ssh dies reconnects and
# shows every line exactly once; stop and status work over ssh.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
RH=$TRASH/gpuhost-home
wait_grep() {
	for _i in $(seq 1 $((${3:-20} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
# The ssh child of a gpurun process.
ssh_of() { pgrep -P "$1" -x ssh; }
# ini COMMAND: the project on the sshd, [remote] path relative to its home.
ini() {
	write_ini "$P" gpuhost openssh proj
	printf '[build]\ncommand =\n[train]\ncommand = %s\nstop_grace = 1\n' "$1" >> "$P/gpurun.ini"
}
# Until sync lands, the project reaches the host by copy.
put() { mkdir -p "$RH/proj" && cp "$P"/*.sh "$RH/proj/"; }
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

test_expect_success 'start a real sshd on loopback' '
	start_sshd gpuhost && trust_sshd gpuhost && mkdir -p "$P" &&
	printf "for i in \$(seq 1 \${1:-30}); do echo line \$i; sleep \${2:-0.1}; done\nexit \${3:-0}\n" >"$P/count.sh" &&
	put
'

test_expect_success 'train over ssh: log streamed, status passed through' '
	cd "$P" && ini "sh count.sh 3 0 7" &&
	test_expect_code 7 "$GPURUN" train >out 2>err &&
	seq 1 3 | sed "s/^/line /" >want && test_cmp want out
'

test_expect_success 'the job survives kill -9 of gpurun; logs -f shows all of it' '
	cd "$P" && ini "sh count.sh 30 0.1 0" && rm -f out &&
	{ "$GPURUN" train >out 2>err & } && gpid=$! &&
	wait_grep "line 3\$" out && kill -9 $gpid && { wait $gpid || :; } &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	"$GPURUN" status "$id" >st && test_grep running st &&
	test_expect_code 0 "$GPURUN" logs -f "$id" >all &&
	seq 1 30 | sed "s/^/line /" >want && test_cmp want all
'

test_expect_success 'the job survives its connection dying (ssh killed); train reconnects, no line lost or doubled' '
	cd "$P" && ini "sh count.sh 40 0.1 3" && rm -f out &&
	{ "$GPURUN" train >out 2>err & } && gpid=$! &&
	wait_grep "line 5\$" out && kill -9 $(ssh_of $gpid) &&
	wait_grep "reconnected" err && wait_grep "line 20\$" out && kill -9 $(ssh_of $gpid) &&
	{ wait $gpid; rc=$?; } && test $rc = 3 &&
	seq 1 40 | sed "s/^/line /" >want && test_cmp want out &&
	test $(grep -c "connection lost" err) = 2
'

test_expect_success 'logs -f through a dropped connection, from a byte offset after --tail' '
	cd "$P" && ini "sh count.sh 60 0.1 0" &&
	id=$("$GPURUN" -q train --detach) && rm -f out &&
	{ "$GPURUN" logs -f --tail 1 "$id" >out 2>err & } && lpid=$! &&
	wait_grep "^line " out && first=$(head -n1 out | cut -d" " -f2) &&
	test "$first" -le 55 &&
	wait_grep "line $((first + 3))\$" out && kill -9 $(ssh_of $lpid) &&
	wait $lpid &&
	seq "$first" 60 | sed "s/^/line /" >want && test_cmp want out
'

test_expect_success 'stop and status over ssh; status --json parses' '
	cd "$P" && ini "sleep 600" &&
	id=$("$GPURUN" -q train --detach) && sleep 0.5 &&
	"$GPURUN" status --json >js && python3 -m json.tool js >/dev/null &&
	"$GPURUN" stop "$id" 2>err && test_grep "SIGTERM to" err &&
	"$GPURUN" status "$id" >st && test_grep stopped st
'

test_done
