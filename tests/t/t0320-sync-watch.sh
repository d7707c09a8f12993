#!/bin/bash
# gpurun sync --watch against a real sshd through the delay proxy: edits,
# new files and folders, deletions and renames reach the host; git's rules
# hold (an ignored folder is neither sent nor watched, a file un-ignored by
# editing .gitignore is then sent); a cut connection and a refused one are
# survived; `gpurun train` started meanwhile waits for the sync in flight;
# Ctrl-C exits 0 (last sync good), 255 (host unreachable), 249 (during a
# sync: the host keeps each file old or new), and leaves no process on
# either side. Also run against `make PORTABLE=1 SAN=1` (the stat-scan
# fallback): GPURUN_BUILD=$PWD/build-portable-san.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/gpuhost-home/proj
WPID=

# until SECONDS CMD...: poll CMD every 0.05 s, at most SECONDS.
until_ok() {
	_t=$1; shift
	for _i in $(seq 1 $((_t * 20))); do
		"$@" 2>/dev/null && return 0
		sleep 0.05
	done
	say "timed out after ${_t}s waiting for: $*"
	return 1
}
has() { [ -e "$R/$1" ]; }
hasnt() { [ ! -e "$R/$1" ] && [ ! -L "$R/$1" ]; }
same() { cmp -s "$P/$1" "$R/$1"; }
same_trees() {
	tree_sig "$P" .git .venv >"$TRASH/sig.local" && tree_sig "$R" .git .venv >"$TRASH/sig.remote" &&
	test_cmp "$TRASH/sig.local" "$TRASH/sig.remote"
}

# start_watch [ENV=VALUE...]: the watcher in the background, its stderr in
# $TRASH/w.err; waits for its first sync.
start_watch() {
	: >"$TRASH/w.err"
	(cd "$P" && exec env "$@" "$GPURUN" sync --watch >"$TRASH/w.out" 2>"$TRASH/w.err") &
	WPID=$!
	until_ok 30 grep -q "watching for changes" "$TRASH/w.err" || { cat "$TRASH/w.err" >&2; return 1; }
}
start_quiet() {
	(cd "$P" && exec "$GPURUN" -q sync --watch >"$TRASH/w.out" 2>"$TRASH/w.err") &
	WPID=$!
}
# stop_watch CODE: SIGINT, then it must exit CODE, within 10 s.
# With CODE 0, first until no sync is in flight (the lock is free).
idle() { sleep 0.2 && flock -n "$P/.gpurun/sync.lock" true; }
stop_watch() {
	{ [ "$1" != 0 ] || until_ok 15 idle; } &&
	kill -INT "$WPID" &&
	until_ok 10 eval '! kill -0 $WPID' &&
	{ wait "$WPID"; _rc=$?; WPID=; } &&
	{ [ "$_rc" = "$1" ] || { say "exit $_rc, expected $1"; cat "$TRASH/w.err" >&2; return 1; }; }
}
kill_watch() { [ -n "$WPID" ] && kill -9 "$WPID" 2>/dev/null; return 0; }
test_atexit kill_watch
scanning() { grep -q "a scan of the tree" "$TRASH/w.err"; }

# The watcher's inotify watches, as inode numbers (decimal), one a line.
watched_inodes() {
	for f in /proc/"$WPID"/fdinfo/*; do
		sed -n 's/^inotify wd:[0-9a-f]* ino:\([0-9a-f]*\) .*/\1/p' "$f" 2>/dev/null
	done | while read -r h; do echo $((16#$h)); done
}

test_expect_success 'setup: sshd, a rate-limited proxy in front of it, a project' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy wan "$SSHD_PORT_gpuhost" 0 2000000 &&
	ssh_host_via viaproxy gpuhost "$PROXY_PORT_wan" &&
	mkdir -p "$P/src" "$P/.venv/lib" &&
	echo "print(1)" >"$P/src/main.py" && echo readme >"$P/README" &&
	echo venv >"$P/.venv/lib/site.py" &&
	printf ".venv/\n*.log\n" >"$P/.gitignore" &&
	write_ini "$P" viaproxy libssh2 proj &&
	printf "[build]\ncommand =\n[train]\ncommand = wc -c < big.bin\n" >>"$P/gpurun.ini" &&
	git -C "$P" init -q
'

test_expect_success 'the first sync, then edits, new files and folders reach the host' '
	start_watch &&
	case $BUILD in
	*portable*) test_grep "watching for changes (a scan of the tree every 1 s)" "$TRASH/w.err" ;;
	*) test_grep "watching for changes (inotify on [0-9]* folders)" "$TRASH/w.err" ;;
	esac &&
	same_trees &&
	echo "print(2)" >"$P/src/main.py" && until_ok 15 same src/main.py &&
	echo new >"$P/new.txt" && until_ok 15 same new.txt &&
	mkdir -p "$P/pkg/sub" && echo a >"$P/pkg/a.py" && echo b >"$P/pkg/sub/b.py" &&
	until_ok 15 same pkg/sub/b.py && same pkg/a.py &&
	echo c >"$P/pkg/sub/c.py" && until_ok 15 same pkg/sub/c.py
'

test_expect_success 'deletions and renames of files and folders' '
	rm "$P/new.txt" && until_ok 15 hasnt new.txt &&
	mv "$P/README" "$P/README.md" && until_ok 15 same README.md && hasnt README &&
	mv "$P/pkg" "$P/lib" && until_ok 15 same lib/sub/c.py && hasnt pkg &&
	echo d >"$P/lib/sub/d.py" && until_ok 15 same lib/sub/d.py &&
	rm -r "$P/lib/sub" && until_ok 15 hasnt lib/sub &&
	same_trees
'

test_expect_success 'git rules: ignored files and folders are not sent, nor watched' '
	mkdir -p "$P/.venv/new" && echo x >"$P/.venv/new/x.py" && echo log >"$P/train.log" &&
	echo marker >"$P/marker" && until_ok 15 same marker &&
	sleep 0.5 && hasnt .venv && hasnt train.log &&
	if scanning; then say "(scanning: no inotify watches to check)"; else
		watched_inodes >"$TRASH/ino" && test -s "$TRASH/ino" &&
		! grep -qx "$(stat -c %i "$P/.venv")" "$TRASH/ino" &&
		! grep -qx "$(stat -c %i "$P/.venv/lib")" "$TRASH/ino" &&
		grep -qx "$(stat -c %i "$P/src")" "$TRASH/ino"
	fi
'

test_expect_success 'a file un-ignored by editing .gitignore is then sent' '
	printf ".venv/\n" >"$P/.gitignore" && until_ok 15 same train.log &&
	same .gitignore && hasnt .venv &&
	echo "lib/" >"$P/.git/info/exclude" && echo e >"$P/lib/e.py" &&
	echo marker2 >"$P/marker" && until_ok 15 same marker && hasnt lib/e.py &&
	: >"$P/.git/info/exclude" && until_ok 15 same lib/e.py
'

test_expect_success 'a cut connection: it says so, connects again, and syncs' '
	proxy_cut wan &&
	until_ok 15 grep -q "connection lost" "$TRASH/w.err" &&
	echo after-cut >"$P/cut.txt" && until_ok 20 same cut.txt &&
	test_grep "connected again" "$TRASH/w.err"
'

test_expect_success 'a host that refuses connections for a while: edits made meanwhile arrive' '
	proxy_down wan && proxy_cut wan &&
	until_ok 15 eval "test \$(grep -c \"connection lost\" \"$TRASH/w.err\") -ge 2" &&
	echo while-down >"$P/down.txt" && sleep 2 && hasnt down.txt &&
	proxy_up wan && until_ok 40 same down.txt && same_trees
'

test_expect_success 'train started during a sync waits for it, and runs on what it sent' '
	head -c 3000000 /dev/urandom >"$P/big.bin" &&
	until_ok 15 eval "find \"$R\" -name \".gpurun-tmp-*\" | grep -q ." &&
	(cd "$P" && "$GPURUN" train >"$TRASH/train.out" 2>"$TRASH/train.err") &&
	test_grep "waiting for another sync of this project" "$TRASH/train.err" &&
	test_grep -x 3000000 "$TRASH/train.out" && same big.bin
'

test_expect_success 'Ctrl-C after a good sync exits 0; nothing is left running' '
	stop_watch 0 &&
	until_ok 10 eval "! pgrep -f \"$TRASH/gpuhost-home/.cache/gpurun/agent\" >/dev/null"
'

test_expect_success 'Ctrl-C while the host is unreachable exits 255' '
	start_watch && proxy_down wan && proxy_cut wan &&
	until_ok 15 grep -q "connection lost" "$TRASH/w.err" &&
	stop_watch 255 && proxy_up wan
'

test_expect_success 'Ctrl-C during a sync exits 249; the host has each file old or new' '
	start_watch &&
	cp "$P/big.bin" "$TRASH/big.old" && head -c 3000000 /dev/urandom >"$P/big.bin" &&
	until_ok 15 eval "find \"$R\" -name \".gpurun-tmp-*\" | grep -q ." &&
	stop_watch 249 && test_grep "interrupted during a sync" "$TRASH/w.err" &&
	{ cmp -s "$R/big.bin" "$TRASH/big.old" || cmp -s "$R/big.bin" "$P/big.bin"; } &&
	(cd "$P" && "$GPURUN" -q sync) && same_trees
'

test_expect_success 'the watch limit reached: it says so and scans instead' '
	if scanning; then say "(already scanning)"; else
		start_watch GPURUN_WATCH_LIMIT=2 &&
		test_grep "limit of watched folders is reached" "$TRASH/w.err" &&
		test_grep "a scan of the tree every 1 s" "$TRASH/w.err" &&
		echo limited >"$P/src/limited.py" && until_ok 15 same src/limited.py &&
		stop_watch 0
	fi
'

test_expect_success '-q: no line per sync; --watch refuses --dry-run' '
	start_quiet && echo quiet >"$P/quiet.txt" && until_ok 20 same quiet.txt &&
	stop_watch 0 && ! test -s "$TRASH/w.err" &&
	(cd "$P" && test_expect_code 252 "$GPURUN" sync --watch --dry-run 2>"$TRASH/err") &&
	test_grep "cannot be combined with --dry-run" "$TRASH/err"
'

test_done
