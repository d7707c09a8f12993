#!/bin/bash
# A watcher's syncs do not walk the tree when inotify said what changed:
# the last committed state plus the reported paths (sync_incr.c), the
# agent trusting its copy (OPEN flag 16). After each kind of change the
# host must hold what a walked sync makes (a dry run, which walks here and
# has the agent look at its whole copy, finds nothing to do), and the
# changes a list of paths cannot settle must walk: edits, new files,
# deletions, renames, a mode change (no walk); a new ignored file (not
# sent); .gitignore edited (walks; the file un-ignored is sent); folders
# made, renamed, removed; a symlink swapped for a folder and back; events
# dropped by inotify (a tiny fs.inotify.max_queued_events, as root; else
# skipped); a change made on the host (the next walked sync repairs it);
# another sync of the project, and another clone syncing into the same
# host folder, between two of the watcher's syncs.
# Against `make PORTABLE=1 SAN=1` (no inotify) everything walks: skipped.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/gpuhost-home/proj
WPID=

until_ok() {
	_t=$1; shift
	for _i in $(seq 1 $((_t * 20))); do
		"$@" 2>/dev/null && return 0
		sleep 0.05
	done
	say "timed out after ${_t}s waiting for: $*"
	return 1
}
start_watch() {
	: >"$TRASH/w.err"
	(cd "$P" && exec env GPURUN_TRACE=1 "$@" "$GPURUN" -v sync --watch >"$TRASH/w.out" 2>"$TRASH/w.err") &
	WPID=$!
	until_ok 30 grep -q "watching for changes" "$TRASH/w.err" || { cat "$TRASH/w.err" >&2; return 1; }
}
idle() { sleep 0.2 && flock -n "$P/.gpurun/sync.lock" true; }
stop_watch() {
	until_ok 15 idle && kill -INT "$WPID" &&
	until_ok 10 eval '! kill -0 $WPID' && { wait "$WPID"; WPID=; }
}
kill_watch() { [ -n "$WPID" ] && kill -9 "$WPID" 2>/dev/null; return 0; }
test_atexit kill_watch

# How the watcher's syncs went: "no walk" lines, and syncs in all.
nowalks() { grep -c "sync: no walk" "$TRASH/w.err" || :; }
syncs() { grep -c "sync: scanned" "$TRASH/w.err" || :; }
# settle: a sync that asks the watcher (it syncs what it saw change).
settle() {
	(cd "$P" && "$GPURUN" -v sync) 2>"$TRASH/s.err" &&
	test_grep "asked the watcher (pid $WPID)" "$TRASH/s.err"
}
# walked_clean: a dry run (it walks; the agent refreshes) finds nothing
# to send, delete or update: the host is as a walked sync makes it.
walked_clean() {
	(cd "$P" && "$GPURUN" sync --dry-run) >"$TRASH/dry.out" 2>"$TRASH/dry.err" &&
	test_grep "would send 0 files, .*; delete 0; update 0" "$TRASH/dry.err" &&
	{ [ ! -s "$TRASH/dry.out" ] || { cat "$TRASH/dry.out" >&2; return 1; }; }
}
# step CMD...: CMD, settle, then the host as a walk makes it; $NW, $NS:
# the counts after.
step() {
	_nw=$(nowalks); _ns=$(syncs)
	eval "$*" && settle && walked_clean &&
	NW=$(( $(nowalks) - _nw )) && NS=$(( $(syncs) - _ns ))
}
no_walk() { [ "$NS" -ge 1 ] && [ "$NW" = "$NS" ] || { say "syncs $NS, without walking $NW"; tail -n 30 "$TRASH/w.err" >&2; return 1; }; }
all_walked() { [ "$NS" -ge 1 ] && [ "$NW" = 0 ] || { say "syncs $NS, without walking $NW"; tail -n 30 "$TRASH/w.err" >&2; return 1; }; }
same() { cmp -s "$P/$1" "$R/$1" || { say "$1 differs on the host"; return 1; }; }
hasnt() { [ ! -e "$R/$1" ] && [ ! -L "$R/$1" ] || { say "$1 is still on the host"; return 1; }; }

test_expect_success 'setup: sshd, a project, a watcher' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	mkdir -p "$P/src/deep/er" "$P/data" "$P/docs" &&
	for i in 1 2 3 4 5 6 7 8; do echo "f$i" >"$P/src/f$i.py"; echo "d$i" >"$P/data/d$i.txt"; done &&
	echo deep >"$P/src/deep/er/x.c" && echo doc >"$P/docs/a.md" &&
	ln -s src/f1.py "$P/link" &&
	printf "*.log\nbuild/\n" >"$P/.gitignore" &&
	git -C "$P" init -q &&
	write_ini "$P" gpuhost libssh2 proj &&
	start_watch
'

if [ -z "$(ls -l /proc/$WPID/fd 2>/dev/null | grep inotify)" ]; then
	test_skip 'the rest' 'no inotify (PORTABLE=1): every sync walks'
	stop_watch
	test_done
fi

test_expect_success 'edits, new files, deletions: no walk' '
	step "echo edited >>\"$P/src/f1.py\"; echo new >\"$P/src/new.py\"; rm \"$P/data/d2.txt\"; echo deep2 >\"$P/src/deep/er/y.c\"" &&
	no_walk && same src/f1.py && same src/new.py && same src/deep/er/y.c && hasnt data/d2.txt
'

test_expect_success 'a deletion alone, an edit alone: no walk' '
	step "rm \"$P/data/d4.txt\"" && no_walk && hasnt data/d4.txt &&
	step "echo again >>\"$P/data/d5.txt\"" && no_walk && same data/d5.txt
'

test_expect_success 'renames of files, within and across folders: no walk' '
	step "mv \"$P/src/f3.py\" \"$P/src/f3b.py\"; mv \"$P/data/d3.txt\" \"$P/docs/d3.txt\"" &&
	no_walk && same src/f3b.py && same docs/d3.txt && hasnt src/f3.py && hasnt data/d3.txt
'

test_expect_success 'a mode change, a symlink retargeted, a file made a symlink: no walk' '
	step "chmod 755 \"$P/src/f4.py\"; ln -sfn docs \"$P/link\"; rm \"$P/src/f5.py\"; ln -s f6.py \"$P/src/f5.py\"" &&
	no_walk && [ -x "$R/src/f4.py" ] && [ "$(readlink "$R/link")" = docs ] &&
	[ "$(readlink "$R/src/f5.py")" = f6.py ]
'

test_expect_success 'the watcher syncs an edit by itself, without walking' '
	_nw=$(nowalks) &&
	echo "by itself" >"$P/src/f7.py" &&
	until_ok 20 same src/f7.py && until_ok 15 idle &&
	[ "$(nowalks)" -gt "$_nw" ] && walked_clean
'

test_expect_success 'a new ignored file is not sent (no walk)' '
	step "echo log >\"$P/src/run.log\"" &&
	[ "$NW" = "$NS" ] && hasnt src/run.log
'

test_expect_success '.gitignore edited: it walks, and the file un-ignored is sent' '
	step "printf \"build/\\n\" >\"$P/.gitignore\"" &&
	all_walked && same src/run.log &&
	step "echo more >>\"$P/src/run.log\"" && no_walk && same src/run.log
'

test_expect_success 'folders made, renamed, removed: they walk' '
	step "mkdir -p \"$P/newdir/sub\"; echo n >\"$P/newdir/sub/n.txt\"" &&
	all_walked && same newdir/sub/n.txt &&
	step "mv \"$P/newdir\" \"$P/moved\"" && all_walked && same moved/sub/n.txt && hasnt newdir &&
	step "rm -r \"$P/moved\"" && all_walked && hasnt moved &&
	step "echo after >>\"$P/src/f8.py\"" && no_walk && same src/f8.py
'

test_expect_success 'a symlink swapped for a folder, and back' '
	step "rm \"$P/link\"; mkdir \"$P/link\"; echo in >\"$P/link/in.txt\"" &&
	[ -d "$R/link" ] && [ ! -L "$R/link" ] && same link/in.txt &&
	step "rm -r \"$P/link\"; ln -s src \"$P/link\"" &&
	[ "$(readlink "$R/link")" = src ]
'

test_expect_success 'a file in a new folder then edited alone: no walk for the edit' '
	step "mkdir \"$P/later\"; echo 1 >\"$P/later/a\"" && all_walked &&
	step "echo 2 >>\"$P/later/a\"" && no_walk && same later/a
'

# (The agent trusts its copy for a sync without a walk: a change made
# there waits for the next walked sync, this watcher's at most 10 min on.)
test_expect_success 'a change made on the host is repaired by a walked sync' '
	echo "changed there" >"$R/docs/a.md" &&
	_nw=$(nowalks) &&
	echo x >>"$P/src/f1.py" && settle && same src/f1.py &&
	[ "$(nowalks)" -gt "$_nw" ] &&
	stop_watch &&
	(cd "$P" && "$GPURUN" sync) 2>"$TRASH/s.err" && same docs/a.md && walked_clean &&
	start_watch
'

# fs.inotify.max_queued_events is read when an inotify instance is made:
# a tiny one only for this watcher's first instance (put back at once).
# Stopped (SIGSTOP) while 100 files change, it loses events; it must walk.
test_expect_success 'events dropped by inotify: it walks' '
	if ! [ "$(id -u)" = 0 ] || ! [ -w /proc/sys/fs/inotify/max_queued_events ]; then
		say "skipped: cannot set fs.inotify.max_queued_events (not root)"; return 0
	fi
	stop_watch &&
	old=$(cat /proc/sys/fs/inotify/max_queued_events) &&
	echo 16 >/proc/sys/fs/inotify/max_queued_events &&
	{ start_watch; rc=$?; echo "$old" >/proc/sys/fs/inotify/max_queued_events; [ $rc = 0 ]; } &&
	_nw=$(nowalks) && _ns=$(syncs) &&
	kill -STOP "$WPID" &&
	for i in $(seq 1 100); do echo "$i" >"$P/data/d1.txt"; echo "$i" >"$P/data/burst$i"; done &&
	kill -CONT "$WPID" &&
	settle && walked_clean && [ "$(syncs)" -gt "$_ns" ] && [ "$(nowalks)" = "$_nw" ] &&
	same data/d1.txt && same data/burst100 &&
	step "echo y >>\"$P/data/d1.txt\"" && no_walk && same data/d1.txt
'

# A sync without the walk tells a no-op from the reported entries alone
# (no digest of the whole list): an edit that keeps the size (hashed,
# and different) must still go; a file written again as it was, mtime
# kept, is nothing to do.
test_expect_success 'an edit that keeps the size goes; a file rewritten as it was is up to date' '
	step "printf \"F2\\n\" >\"$P/src/f2.py\"" && no_walk && same src/f2.py &&
	step "touch -d @1700000000 \"$P/src/f2.py\"" && no_walk &&
	[ "$(stat -c %Y "$R/src/f2.py")" = 1700000000 ] &&
	cp -p "$P/src/f2.py" "$TRASH/f2.keep" &&
	step "cat \"$TRASH/f2.keep\" >\"$P/src/f2.py\"; touch -r \"$TRASH/f2.keep\" \"$P/src/f2.py\"" &&
	test_grep "asked the watcher (pid $WPID): up to date" "$TRASH/s.err" && same src/f2.py
'

# The watcher keeps what its last sync committed (remote-KEY's list) and
# its agent keeps the manifest it wrote, between syncs: each is used only
# while its file is the one written. Another gpurun of this project
# commits meanwhile (the watcher stopped, so it is not asked): the
# watcher's next sync must walk, not plan against its old list.
test_expect_success 'another sync of this project commits meanwhile: the watcher walks next' '
	until_ok 15 idle &&
	kill -STOP "$WPID" &&
	echo "other sync" >>"$P/src/f6.py" &&
	{ (cd "$P" && GPURUN_IO_TIMEOUT=2 "$GPURUN" -v sync) 2>"$TRASH/o.err"; rc=$?;
	  kill -CONT "$WPID"; [ $rc = 0 ]; } &&
	test_grep "walked the tree" "$TRASH/o.err" && same src/f6.py &&
	step "echo w >>\"$P/src/f7.py\"" && all_walked && same src/f7.py &&
	step "echo w2 >>\"$P/src/f7.py\"" && no_walk && same src/f7.py
'

# Another clone of the project commits into the same host folder between
# two of the watcher's syncs: the agent the watcher is connected to must
# not use the manifest it kept from the watcher's last COMMIT (the file is
# another now). The host must then be this project, exactly.
test_expect_success 'another client commits into the host folder meanwhile: the host ends exact' '
	until_ok 15 idle &&
	rm -rf "$TRASH/p2" && cp -a "$P" "$TRASH/p2" && rm -rf "$TRASH/p2/.gpurun" &&
	echo "from the other clone" >"$TRASH/p2/other.txt" &&
	echo "changed by the other clone" >"$TRASH/p2/docs/a.md" &&
	(cd "$TRASH/p2" && "$GPURUN" sync) 2>"$TRASH/p2.err" &&
	[ -e "$R/other.txt" ] && cmp -s "$TRASH/p2/docs/a.md" "$R/docs/a.md" &&
	step "echo after-other >>\"$P/src/f8.py\"" &&
	same src/f8.py && same docs/a.md && hasnt other.txt &&
	step "echo again >>\"$P/src/f8.py\"" && no_walk && same src/f8.py
'

test_expect_success 'GPURUN_WATCH_WALK=1: every sync walks' '
	stop_watch && start_watch GPURUN_WATCH_WALK=1 &&
	step "echo z >>\"$P/src/f2.py\"" && all_walked && same src/f2.py
'

test_expect_success 'stopped: a walked sync finds nothing to do' '
	stop_watch &&
	(cd "$P" && "$GPURUN" sync) 2>"$TRASH/s.err" &&
	test_grep "synced 0 files (0 deleted).*(up to date)" "$TRASH/s.err"
'

test_done
