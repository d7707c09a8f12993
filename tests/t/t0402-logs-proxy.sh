#!/bin/bash
# logs -f through the delay proxy, which the test cuts (every connection
# dropped) and takes down and up again: every line of the job shows
# exactly once, in order, and the follower exits with the job's status.
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
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

test_expect_success 'sshd behind a delay proxy (10 ms each way)' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy wan "$SSHD_PORT_gpuhost" 10 && ssh_host_via viaproxy gpuhost "$PROXY_PORT_wan" &&
	mkdir -p "$P" "$RH/proj" && write_ini "$P" viaproxy openssh proj &&
	printf "[build]\ncommand =\n[train]\ncommand = sh count.sh\n" >>"$P/gpurun.ini" &&
	printf "i=1; while [ \$i -le 150 ]; do echo \"numbered line \$i\"; i=\$((i+1)); sleep 0.04; done; exit 9\n" >"$RH/proj/count.sh"
'

test_expect_success 'logs -f: cut twice, down then up: every line once, status 9' '
	cd "$P" && id=$("$GPURUN" -q train --detach) && rm -f out err &&
	{ "$GPURUN" logs -f "$id" >out 2>err & } && lpid=$! &&
	wait_grep "line 20\$" out && proxy_cut wan &&
	wait_grep reconnected err && wait_grep "line 50\$" out && proxy_cut wan &&
	sleep 0.3 && proxy_down wan && sleep 1.5 && proxy_up wan &&
	{ wait $lpid; rc=$?; } && test $rc = 9 &&
	seq 1 150 | sed "s/^/numbered line /" >want && test_cmp want out &&
	test $(grep -c "connection lost" err) -ge 2 && test $(grep -c reconnected err) -ge 2
'

test_expect_success 'train stays attached through a cut and pulls the artifacts at the end' '
	cd "$P" && printf "[artifacts]\npull = result.txt\n" >>gpurun.ini &&
	printf "echo a; sleep 1; echo b; sleep 1; echo c; echo done >\$GPURUN_JOB_DIR/result.txt\n" >"$RH/proj/short.sh" &&
	rm -f out && { "$GPURUN" -o train.command="sh short.sh" train >out 2>err & } && tpid=$! &&
	wait_grep "^a\$" out && proxy_cut wan && wait $tpid && rc=$? && test $rc = 0 &&
	printf "a\nb\nc\n" >want && test_cmp want out &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && test "$(cat runs/$id/result.txt)" = done
'

test_done
