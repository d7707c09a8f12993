#!/bin/bash
# The connection holder ([remote] persist) against a real sshd: the first
# command starts one, later ones reuse it (one login in sshd's log), two
# commands racing get one, it ends after its idle time and removes its
# socket, a killed or cut one is replaced, an unsafe folder is not used,
# the host refusing channels falls back to a direct connection, Ctrl-C
# ends the remote command, and the holder's own process is clean
# (its sanitizer reports would land in hold.log).
. "$(dirname "$0")/../lib.sh"

P=$TRASH/p
HD=$XDG_RUNTIME_DIR/gpurun
unset GPURUN_REMOTE_PERSIST

# The holders alive now, one pid a line (from their pid files).
holders() {
	for _f in "$HD"/*.pid; do
		[ -f "$_f" ] && kill -0 "$(cat "$_f")" 2>/dev/null && cat "$_f"
	done
	return 0
}
nholders() { holders | wc -l; }
# Wait (5 s at most) until no holder is alive.
no_holders() {
	stop_holders
	for _i in $(seq 1 100); do
		[ "$(nholders)" = 0 ] && return 0
		sleep 0.05
	done
	say "holders still alive: $(holders)"
	return 1
}
logins() { grep -c "Accepted publickey" "$TRASH/sshd-gpuhost/sshd.log"; }
# The sshd processes serving gpuhost's connections (not its listener).
session_pids() {
	for _m in $(pgrep -P "$(cat "$TRASH/sshd-gpuhost/sshd.pid")"); do
		echo "$_m" $(pgrep -P "$_m" -f "sshd")
	done
}

test_expect_success 'setup: sshd (logging logins) and a project' '
	start_sshd gpuhost "LogLevel INFO" && trust_sshd gpuhost &&
	write_ini "$P" gpuhost libssh2 rproj && mkdir -p "$TRASH/gpuhost-home/rproj"
'

test_expect_success 'the first command starts a holder; the next ones use it (one login)' '
	cd "$P" && "$GPURUN" -v exec echo one >out 2>err &&
	test_grep -x one out && test_grep "keeping the connection to gpuhost open" err &&
	test "$(nholders)" = 1 && n=$(logins) &&
	"$GPURUN" -v exec echo two >out 2>err && test_grep -x two out &&
	test_grep "using the open connection to gpuhost" err &&
	"$GPURUN" exec true && "$GPURUN" status >/dev/null &&
	test "$(logins)" = "$n" && test "$(nholders)" = 1
'

test_expect_success 'the folder is 0700 and ours, the socket 0600' '
	test "$(stat -c %a "$HD")" = 700 && test "$(stat -c %u "$HD")" = "$(id -u)" &&
	for s in "$HD"/*.sock; do test -S "$s" && test "$(stat -c %a "$s")" = 600 || return 1; done
'

test_expect_success 'through the holder: stdout and stderr apart, the exit status passed on' '
	cd "$P" && test_expect_code 3 "$GPURUN" exec -- sh -c "echo to-out; echo to-err >&2; exit 3" >out 2>err &&
	test_grep -x to-out out && test_grep -x to-err err && ! test_grep to-err out
'

test_expect_success 'a megabyte each way through the holder, intact' '
	cd "$P" && head -c 1048576 /dev/urandom >big &&
	"$GPURUN" exec -- sh -c "cat >/dev/null; head -c 1048576 /dev/zero" <big >back &&
	test "$(wc -c <back)" = 1048576 &&
	"$GPURUN" exec -- md5sum <big >sum && test "$(cut -d" " -f1 sum)" = "$(md5sum <big | cut -d" " -f1)"
'

test_expect_success 'train and status through the holder' '
	cd "$P" && printf "[build]\ncommand =\n[train]\ncommand = echo hi from the job\n" >>gpurun.ini &&
	"$GPURUN" train >out 2>err && test_grep -x "hi from the job" out &&
	"$GPURUN" status >st && test_grep done st && test "$(nholders)" = 1
'

test_expect_success 'eight commands racing with no holder start one, and all run' '
	no_holders && cd "$P" && n=$(logins) &&
	for i in 1 2 3 4 5 6 7 8; do { "$GPURUN" exec echo "r$i" >"race$i.out" 2>"race$i.err" & }; done &&
	wait &&
	for i in 1 2 3 4 5 6 7 8; do test_grep -x "r$i" "race$i.out" || return 1; done &&
	test "$(nholders)" = 1 && test "$(( $(logins) - n ))" = 1
'

test_expect_success 'idle: the holder ends after persist, and removes its socket and pid file' '
	no_holders && cd "$P" && GPURUN_REMOTE_PERSIST=2s "$GPURUN" exec true &&
	pid=$(holders) && test -n "$pid" && sleep 1 && kill -0 $pid &&
	for i in $(seq 1 80); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done &&
	! kill -0 $pid 2>/dev/null && ! ls "$HD"/*.sock 2>/dev/null && ! ls "$HD"/*.pid 2>/dev/null
'

test_expect_success 'doctor names the holder it does not use (and the next command reuses it)' '
	no_holders && cd "$P" && "$GPURUN" doctor >out 2>&1 &&
	test_grep "persist .*none open now: the next command keeps one open for 10m" out &&
	test "$(nholders)" = 0 && "$GPURUN" exec true && pid=$(holders) &&
	"$GPURUN" doctor >out 2>&1 &&
	test_grep "persist .*kept open (pid $pid) for 10m after its last command" out &&
	test "$(holders)" = "$pid" &&
	GPURUN_REMOTE_PERSIST=0 "$GPURUN" doctor >out 2>&1 &&
	test_grep "persist .*off (\[remote\] persist = 0)" out
'

test_expect_success 'persist = 0: a new connection each time, no holder' '
	no_holders && cd "$P" && n=$(logins) &&
	GPURUN_REMOTE_PERSIST=0 "$GPURUN" exec true && GPURUN_REMOTE_PERSIST=0 "$GPURUN" exec true &&
	test "$(nholders)" = 0 && ! ls "$HD"/*.sock 2>/dev/null && test "$(( $(logins) - n ))" = 2
'

test_expect_success 'a bad value for persist is a clear error' '
	cd "$P" && test_expect_code 253 env GPURUN_REMOTE_PERSIST=forever "$GPURUN" exec true 2>err &&
	test_grep "GPURUN_REMOTE_PERSIST: invalid value" err &&
	test_expect_code 253 env GPURUN_REMOTE_PERSIST=30d "$GPURUN" exec true 2>err &&
	test_grep "at most 7 days" err
'

test_expect_success 'a holder killed with -9: the next command starts another' '
	cd "$P" && "$GPURUN" exec true && old=$(holders) && test -n "$old" &&
	kill -9 $old && sleep 0.1 && test -S "$HD"/*.sock &&
	"$GPURUN" exec echo after >out && test_grep -x after out &&
	new=$(holders) && test -n "$new" && test "$new" != "$old"
'

test_expect_success 'disconnect: a running command finishes, the next one connects afresh' '
	no_holders && cd "$P" && "$GPURUN" exec true && old=$(holders) && n=$(logins) &&
	{ "$GPURUN" exec -- sh -c "sleep 1; echo finished" >run.out 2>run.err & g=$!; } && sleep 0.3 &&
	"$GPURUN" disconnect 2>err && test_grep "closed the connection to gpuhost (pid $old)" err &&
	! ls "$HD"/*.sock 2>/dev/null && kill -0 $old &&
	"$GPURUN" exec echo fresh >out && test_grep -x fresh out && test "$(( $(logins) - n ))" = 1 &&
	wait $g && test_grep -x finished run.out &&
	for i in $(seq 1 100); do kill -0 $old 2>/dev/null || break; sleep 0.05; done &&
	! kill -0 $old 2>/dev/null && new=$(holders) && test -n "$new" && test "$new" != "$old" &&
	"$GPURUN" disconnect 2>err && "$GPURUN" disconnect 2>err &&
	test_grep "no open connection to gpuhost" err && test_expect_code 252 "$GPURUN" disconnect extra
'

test_expect_success 'a holder whose socket is removed ends (none is left unfindable)' '
	no_holders && cd "$P" && "$GPURUN" exec true && old=$(holders) && test -n "$old" &&
	rm -f "$HD"/*.sock &&
	for i in $(seq 1 100); do kill -0 $old 2>/dev/null || break; sleep 0.05; done &&
	! kill -0 $old 2>/dev/null && ! ls "$HD"/*.pid 2>/dev/null
'

test_expect_success 'a listener that is not a holder (closes at once): the command connects directly' '
	sock= && no_holders && cd "$P" && "$GPURUN" exec true && sock=$(ls "$HD"/*.sock) && no_holders &&
	{ python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
while True:
    c, _ = s.accept(); c.close()
" "$sock" & } && fake=$! &&
	for i in $(seq 1 50); do test -S "$sock" && break; sleep 0.05; done &&
	{ "$GPURUN" -v exec echo direct >out 2>err; rc=$?; kill $fake; wait $fake 2>/dev/null
	rm -f "$sock"; } && test $rc = 0 && test_grep -x direct out &&
	test_grep "could not serve: .*; connecting directly" err
'

test_expect_success 'a folder others may enter is not used: said each time, the command still runs' '
	no_holders && chmod 755 "$HD" && cd "$P" &&
	"$GPURUN" exec echo fine >out 2>err; rc=$?; chmod 700 "$HD"
	test $rc = 0 && test_grep -x fine out &&
	test_grep "not keeping the connection open: others may enter .*0755" err &&
	test "$(nholders)" = 0
'

test_expect_success 'a folder of another uid is not used' '
	no_holders && chown 65534 "$HD" && cd "$P" &&
	"$GPURUN" exec echo fine >out 2>err; rc=$?; chown "$(id -u)" "$HD"
	test $rc = 0 && test_grep -x fine out && test_grep "belongs to uid 65534" err &&
	test "$(nholders)" = 0
'

test_expect_success 'a holder that cannot connect gives the error a direct connection gives' '
	no_holders && start_sshd stranger && cd "$P" &&
	test_expect_code 254 "$GPURUN" --host stranger exec true 2>err &&
	test_grep "host key for .* is not known" err && test_grep "^hint: .*--accept-new-host-key" err &&
	test "$(nholders)" = 0
'

test_expect_success 'the connection cut under the holder: an error, not a hang; then a new one' '
	no_holders && cd "$P" && "$GPURUN" exec true && old=$(holders) &&
	{ "$GPURUN" exec sleep 30 >out 2>err & g=$!; } && sleep 1 &&
	kill -9 $(session_pids) && { wait $g; rc=$?; } && test $rc != 0 &&
	for i in $(seq 1 100); do kill -0 $old 2>/dev/null || break; sleep 0.05; done &&
	! kill -0 $old 2>/dev/null &&
	"$GPURUN" exec echo again >out && test_grep -x again out && test "$(nholders)" = 1
'

test_expect_success 'Ctrl-C on a command through the holder ends its remote process' '
	cd "$P" && "$GPURUN" exec true && rm -f "$TRASH/rpid" &&
	{ "$GPURUN" exec -- sh -c "echo \$\$ >$TRASH/rpid; exec sleep 60" & g=$!; } &&
	for i in $(seq 1 100); do test -s "$TRASH/rpid" && break; sleep 0.05; done &&
	r=$(cat "$TRASH/rpid") && kill -0 $r && kill -INT $g && { wait $g || :; } &&
	for i in $(seq 1 100); do kill -0 $r 2>/dev/null || break; sleep 0.05; done &&
	! kill -0 $r 2>/dev/null && test "$(nholders)" = 1
'

test_expect_success 'a host that allows 2 sessions: 4 commands at once all run' '
	no_holders && start_sshd narrow "MaxSessions 2" && trust_sshd narrow && cd "$P" &&
	mkdir -p "$TRASH/narrow-home/rproj" &&
	"$GPURUN" --host narrow exec true &&
	for i in 1 2 3 4; do { "$GPURUN" --host narrow exec -- sh -c "sleep 1; echo n$i" >"n$i.out" 2>"n$i.err" & }; done &&
	wait && for i in 1 2 3 4; do test_grep -x "n$i" "n$i.out" || { cat "n$i.err"; return 1; }; done
'

# The holder processes of this file's folder, found by their command line
# (not by pid file: the model checks that the two agree).
holder_procs() { pgrep -f "__hold $HD/" | sort; }

# One model step; the invariant after it: at most one holder, and every
# holder process has its pid file (findable, so stop_holders reaches it).
model_step() {
	case $1 in
	cmd) "$GPURUN" exec echo "s$2" >m.out 2>m.err && test_grep -x "s$2" m.out ;;
	race)
		for _j in 1 2 3; do { "$GPURUN" exec echo "s$2.$_j" >"m$_j.out" 2>&1 & }; done
		wait
		for _j in 1 2 3; do test_grep -x "s$2.$_j" "m$_j.out" || return 1; done ;;
	kill)
		for _p in $(holder_procs); do
			kill -9 "$_p"
			for _i in $(seq 1 100); do kill -0 "$_p" 2>/dev/null || break; sleep 0.02; done
		done ;;
	cut) _s=$(session_pids); [ -z "$_s" ] || kill -9 $_s; sleep 0.1 ;;
	idle)
		sleep 1.3
		for _i in $(seq 1 40); do [ -z "$(holder_procs)" ] && break; sleep 0.05; done
		[ -z "$(holder_procs)" ] || { say "a holder outlived its idle time"; return 1; } ;;
	cold) GPURUN_REMOTE_PERSIST=0 "$GPURUN" exec echo "s$2" >m.out 2>m.err && test_grep -x "s$2" m.out ;;
	esac || return 1
	[ "$(holder_procs | wc -l)" -le 1 ] || { say "two holders: $(holder_procs)"; return 1; }
	[ "$(holder_procs)" = "$(holders | sort)" ] ||
		{ say "holder processes '$(holder_procs)' but pid files name '$(holders)'"; return 1; }
}

test_expect_success 'model: random commands, races, kills, cuts and idle waits (seeds printed)' '
	no_holders && cd "$P" && export GPURUN_REMOTE_PERSIST=1s &&
	for seed in ${GPURUN_PERSIST_SEEDS:-11 12}; do
		RANDOM=$seed && ops= && say "seed $seed (GPURUN_PERSIST_SEEDS=$seed replays it)" &&
		for step in $(seq 1 ${GPURUN_PERSIST_STEPS:-24}); do
			set -- cmd cmd cmd race kill cut idle cold && shift $((RANDOM % 8)) &&
			ops="$ops $1" &&
			model_step "$1" "$seed.$step" || { say "failed at step $step: $ops"; unset GPURUN_REMOTE_PERSIST; return 1; }
		done || return 1
	done; rc=$?; unset GPURUN_REMOTE_PERSIST; return $rc
'

test_expect_success 'the holders exit cleanly: no sanitizer report in their log' '
	no_holders && sleep 0.2 && ! grep -E "ERROR: |runtime error" "$GPURUN_HOLD_LOG"
'

test_done
