#!/bin/bash
# With `gpurun sync --watch` running, `gpurun sync` asks the watcher
# (.gpurun/watch.sock) instead of walking the tree: -v says which; an edit
# made just before the sync is on the host when it returns (many times
# over, to catch a late inotify event); a dry run, other settings, another
# project, a watcher that scans (no inotify), one whose connection is
# lost, one killed with -9 (stale socket) and one that never answers are
# not asked or not believed: the sync walks and succeeds, within
# GPURUN_IO_TIMEOUT, and Ctrl-C ends it at once; a socket another user
# owns, or that others may use, is not trusted, even if it answers.
# Against `make PORTABLE=1 SAN=1` (no inotify: nothing listens) it checks
# that the sync walks, and skips the rest.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
Q=$TRASH/proj2
R=$TRASH/gpuhost-home/proj
S=$P/.gpurun/watch.sock
WPID=
FPID=

until_ok() {
	_t=$1; shift
	for _i in $(seq 1 $((_t * 20))); do
		"$@" 2>/dev/null && return 0
		sleep 0.05
	done
	say "timed out after ${_t}s waiting for: $*"
	return 1
}
# start_watch [ENV=VALUE...]: a -v watcher, its stderr in $TRASH/w.err.
start_watch() {
	: >"$TRASH/w.err"
	(cd "$P" && exec env "$@" "$GPURUN" -v sync --watch >"$TRASH/w.out" 2>"$TRASH/w.err") &
	WPID=$!
	until_ok 30 grep -q "watching for changes" "$TRASH/w.err" || { cat "$TRASH/w.err" >&2; return 1; }
}
idle() { sleep 0.2 && flock -n "$P/.gpurun/sync.lock" true; }
stop_watch() {
	until_ok 15 idle && kill -INT "$WPID" &&
	until_ok 10 eval '! kill -0 $WPID' && { wait "$WPID"; WPID=; }
}
kill_watch() { [ -n "$WPID" ] && kill -9 "$WPID" 2>/dev/null; return 0; }
kill_fake() { [ -n "$FPID" ] && kill "$FPID" 2>/dev/null; FPID=; return 0; }
test_atexit kill_watch
test_atexit kill_fake

# sync_v [gpurun args...]: gpurun -v sync in $P, stderr in $TRASH/s.err.
sync_v() { (cd "$P" && "$GPURUN" -v "$@" sync) 2>"$TRASH/s.err"; }
asked() { test_grep "asked the watcher (pid $WPID)" "$TRASH/s.err"; }
walked() { test_grep "walked the tree ($1" "$TRASH/s.err" && ! grep -q "asked the watcher" "$TRASH/s.err"; }

# fake_watcher MODE [CHMOD]: a socket at $S that answers "ok up=1" at once
# (MODE lie) or never (MODE mute); its pid in FPID.
fake_watcher() {
	rm -f "$S"
	python3 - "$S" "$1" "${2:-600}" <<-\PY &
	import os, socket, sys, time
	path, mode, perm = sys.argv[1], sys.argv[2], int(sys.argv[3], 8)
	s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	s.bind(path); os.chmod(path, perm); s.listen(8)
	open(path + ".ready", "w").close()
	held = []
	while True:
	    c, _ = s.accept()
	    held.append(c)
	    if mode == "lie":
	        c.recv(4096); c.sendall(b"ok up=1 sent=0\n"); c.close()
	PY
	FPID=$!
	until_ok 10 test -e "$S.ready" && rm -f "$S.ready"
}

test_expect_success 'setup: sshd, a proxy in front of it, a project synced once' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy wan "$SSHD_PORT_gpuhost" 0 &&
	ssh_host_via viaproxy gpuhost "$PROXY_PORT_wan" &&
	mkdir -p "$P/src" && for i in $(seq 1 20); do echo "v0 $i" >"$P/src/f$i.py"; done &&
	printf "*.log\n" >"$P/.gitignore" &&
	write_ini "$P" viaproxy libssh2 proj &&
	(cd "$P" && "$GPURUN" -q sync) && cmp "$P/src/f1.py" "$R/src/f1.py"
'

NOINOTIFY=
test_expect_success 'with a watcher: sync -v asks it, and an idle one says up to date' '
	start_watch &&
	if grep -q "a scan of the tree" "$TRASH/w.err"; then
		NOINOTIFY=1 && test ! -e "$S" && echo scan >>"$P/src/f1.py" &&
		sync_v && walked "no watcher runs)" && cmp "$P/src/f1.py" "$R/src/f1.py" &&
		stop_watch
	else
		test -S "$S" && test "$(stat -c %a "$S")" = 600 &&
		sync_v && asked && test_grep "up to date" "$TRASH/s.err"
	fi
'
if [ -n "$NOINOTIFY" ]; then
	test_skip "the cases that ask a watcher" "the watcher scans: no inotify here (PORTABLE=1?)"
	test_done
fi

test_expect_success 'an edit made just before the sync is on the host when it returns (x40)' '
	for i in $(seq 1 40); do
		echo "edit $i $RANDOM" >"$P/src/f$((i % 20 + 1)).py" &&
		echo "new $i" >"$P/src/n$i.py" && rm -f "$P/src/n$((i - 1)).py" &&
		sync_v && asked || return 1
		cmp "$P/src/f$((i % 20 + 1)).py" "$R/src/f$((i % 20 + 1)).py" &&
		cmp "$P/src/n$i.py" "$R/src/n$i.py" && test ! -e "$R/src/n$((i - 1)).py" || {
			say "round $i: the host lags"; cat "$TRASH/s.err" >&2; return 1; }
	done
'

test_expect_success 'the asked sync prints the usual summary; --stats works' '
	echo more >>"$P/src/f3.py" &&
	(cd "$P" && "$GPURUN" -v sync --stats) >"$TRASH/stats.out" 2>"$TRASH/s.err" &&
	asked && test_grep "^synced 1 file" "$TRASH/s.err" && test_grep "^entries:" "$TRASH/stats.out" &&
	cmp "$P/src/f3.py" "$R/src/f3.py"
'

test_expect_success 'a dry run, and other settings (-o), walk the tree' '
	echo dry >>"$P/src/f4.py" &&
	(cd "$P" && "$GPURUN" -v sync -n) >/dev/null 2>"$TRASH/s.err" &&
	! grep -q "asked the watcher" "$TRASH/s.err" &&
	sync_v -o sync.exclude=nothing-here && walked "the watcher (pid $WPID) says: it syncs with other settings" &&
	cmp "$P/src/f4.py" "$R/src/f4.py"
'

test_expect_success 'train with a watcher: its sync asks, and the job sees the edit' '
	printf "[build]\ncommand =\n[train]\ncommand = cat src/f5.py\n" >>"$P/gpurun.ini" &&
	sleep 0.3 && until_ok 15 idle && echo "for the job" >"$P/src/f5.py" &&
	(cd "$P" && "$GPURUN" -v train) >"$TRASH/train.out" 2>"$TRASH/train.err" &&
	test_grep "for the job" "$TRASH/train.out" &&
	test_grep "asked the watcher (pid $WPID)" "$TRASH/train.err"
'

test_expect_success 'a second project (own folder, no watcher) is not answered by the first one' '
	mkdir -p "$Q" && echo q >"$Q/q.py" && write_ini "$Q" viaproxy libssh2 proj2 &&
	(cd "$Q" && "$GPURUN" -v sync) 2>"$TRASH/q.err" &&
	test_grep "walked the tree (no watcher runs)" "$TRASH/q.err" &&
	cmp "$Q/q.py" "$TRASH/gpuhost-home/proj2/q.py"
'

test_expect_success 'the watcher lost its connection: sync walks and succeeds' '
	proxy_down wan && proxy_cut wan &&
	until_ok 20 grep -q "still cannot connect" "$TRASH/w.err" &&
	proxy_up wan && echo lost >>"$P/src/f6.py" &&
	sync_v && walked "the watcher (pid $WPID) says: its connection to the host is lost" &&
	cmp "$P/src/f6.py" "$R/src/f6.py" &&
	until_ok 20 grep -q "connected again" "$TRASH/w.err"
'

test_expect_success 'killed with -9: the stale socket is walked past, and a new watcher replaces it' '
	until_ok 15 idle && kill -9 "$WPID" && wait "$WPID"; WPID= &&
	test -S "$S" && echo stale >>"$P/src/f7.py" &&
	sync_v && walked "no watcher runs (a stale socket)" && cmp "$P/src/f7.py" "$R/src/f7.py" &&
	start_watch && sync_v && asked
'

test_expect_success 'Ctrl-C stops the watcher; its socket goes with it' '
	stop_watch && test ! -e "$S" &&
	sync_v && walked "no watcher runs)"
'

test_expect_success 'a watcher that scans (no inotify) is not asked' '
	start_watch GPURUN_WATCH_LIMIT=1 && grep -q "a scan of the tree" "$TRASH/w.err" &&
	test ! -e "$S" && echo scan >>"$P/src/f8.py" &&
	sync_v && walked "no watcher runs)" && cmp "$P/src/f8.py" "$R/src/f8.py" &&
	stop_watch
'

test_expect_success 'a socket others may use is not trusted, even if it answers' '
	fake_watcher lie 666 && echo open >>"$P/src/f9.py" &&
	sync_v && walked "'"'"'.gpurun/watch.sock'"'"' is not trusted" &&
	cmp "$P/src/f9.py" "$R/src/f9.py" && kill_fake
'

test_expect_success 'a socket another user owns is not trusted' '
	if [ "$(id -u)" != 0 ]; then say "(not root: cannot give a socket away)"; else
		fake_watcher lie 600 && chown 65534 "$S" && echo other >>"$P/src/f10.py" &&
		sync_v && walked "'"'"'.gpurun/watch.sock'"'"' is not trusted" &&
		cmp "$P/src/f10.py" "$R/src/f10.py" && kill_fake
	fi
'

test_expect_success 'a regular file in its place is not a watcher' '
	rm -f "$S" && echo x >"$S" && echo file >>"$P/src/f11.py" &&
	sync_v && walked "'"'"'.gpurun/watch.sock'"'"' is not trusted" &&
	cmp "$P/src/f11.py" "$R/src/f11.py" && rm -f "$S"
'

test_expect_success 'a watcher that never answers: sync walks after GPURUN_IO_TIMEOUT' '
	fake_watcher mute && echo mute >>"$P/src/f12.py" &&
	start=$(date +%s) &&
	(cd "$P" && GPURUN_IO_TIMEOUT=2 "$GPURUN" -v sync) 2>"$TRASH/s.err" &&
	took=$(( $(date +%s) - start )) && test "$took" -le 10 &&
	walked "the watcher (pid [0-9]*) did not answer in time" &&
	cmp "$P/src/f12.py" "$R/src/f12.py"
'

test_expect_success 'Ctrl-C while it waits for a watcher ends the sync at once' '
	(cd "$P" && exec "$GPURUN" sync) 2>"$TRASH/int.err" &
	spid=$! && sleep 1 && kill -0 "$spid" &&
	kill -INT "$spid" && until_ok 3 eval "! kill -0 $spid" &&
	{ wait "$spid"; test $? -ne 0; } && kill_fake && rm -f "$S"
'

test_done
