#!/bin/bash
# SYNC_PREPARE: a sync's bootstrap command asks the host to lock its copy
# and check it against the manifest while the client still scans; the
# OPEN that follows uses that check. What it must not change: a new
# folder is made only by the OPEN (a dry run makes nothing), a change made
# on the host is still found and undone, a host lock held by someone else
# is waited for (PREPARE does not wait, the OPEN does), and the host's
# lock is never held by a sync that waits for this project's local lock
# (the order of the two locks, as for every sync).
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
Q=$TRASH/other
R=$TRASH/gpuhost-home/proj

mk_tree() { # DIR SEED
	mkdir -p "$1/src/a" "$1/src/b" &&
	for i in $(seq 1 40); do echo "$2 $i" >"$1/src/a/f$i.py"; echo "$i" >"$1/src/b/g$i.py"; done
}

same_trees() {
	tree_sig "$1" >"$TRASH/sig.local" && tree_sig "$R" >"$TRASH/sig.remote" &&
	test_cmp "$TRASH/sig.local" "$TRASH/sig.remote"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

test_expect_success 'setup: sshd and a project' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	mk_tree "$P" p && write_ini "$P" gpuhost libssh2 proj
'

test_expect_success 'a dry run into a folder not made yet makes nothing on the host' '
	(cd "$P" && "$GPURUN" sync --dry-run >"$TRASH/out" 2>&1) &&
	test ! -e "$R"
'

test_expect_success 'the first sync makes the folder (PREPARE found none to check)' '
	(cd "$P" && GPURUN_TRACE=1 "$GPURUN" sync 2>"$TRASH/err") &&
	test_grep "requests in the command" "$TRASH/err" &&
	same_trees "$P"
'

test_expect_success 'a file changed on the host is still found, said and undone' '
	echo "changed behind its back" >"$R/src/a/f3.py" && rm "$R/src/b/g7.py" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	test_grep "f3.py" "$TRASH/err" && test_grep "g7.py" "$TRASH/err" &&
	same_trees "$P"
'

test_expect_success 'a no-op after that is one' '
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err"
'

# PREPARE finds the host's lock taken and leaves the work to the OPEN,
# which waits for it; what the sync sends is then complete.
test_expect_success 'a host lock held by another: the sync waits for it, then syncs' '
	echo new >"$P/src/a/new.py" &&
	flock -x "$R/.gpurun/sync-lock" sleep 3 &
	holder=$! &&
	sleep 0.5 && t0=$(now_ms) &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && t1=$(now_ms) &&
	wait $holder &&
	say "the sync took $((t1 - t0)) ms behind a 3 s host lock" &&
	test $((t1 - t0)) -ge 2000 && same_trees "$P"
'

# While this project's local lock is held (a watcher's sync, say), a sync
# of it waits here, before it connects: it must not hold the host's lock
# meanwhile, or a sync of another checkout into the same folder would
# wait for it. That one ends first; then this one, whose tree wins.
test_expect_success 'waiting for the local lock, a sync holds no host lock' '
	mk_tree "$Q" q && write_ini "$Q" gpuhost libssh2 proj &&
	echo again >"$P/src/a/again.py" &&
	mkdir -p "$P/.gpurun" && : >"$P/.gpurun/sync.lock" &&
	flock -x "$P/.gpurun/sync.lock" sleep 6 &
	holder=$! &&
	sleep 0.3 &&
	(cd "$P" && "$GPURUN" sync >"$TRASH/p.out" 2>&1; echo $? >"$TRASH/p.rc") &
	waiter=$! &&
	sleep 1 && t0=$(now_ms) &&
	(cd "$Q" && "$GPURUN" sync -y 2>"$TRASH/q.err") && t1=$(now_ms) &&
	say "the other checkout synced in $((t1 - t0)) ms while this one waited" &&
	test $((t1 - t0)) -lt 4000 &&
	wait $holder && wait $waiter && test "$(cat "$TRASH/p.rc")" = 0 &&
	test_grep "waiting for another sync" "$TRASH/p.out" &&
	same_trees "$P"
'

# Past 2048 entries the host checks them on up to 4 threads, 4096 at a
# time: changes spread over every thread's range and both blocks, a folder
# removed and one replaced by a symlink (never followed) are all found.
test_expect_success 'a large tree: host changes anywhere in the parallel check are found' '
	python3 - "$P" <<-\PY &&
	import os, sys
	for i in range(6000):
	    d = os.path.join(sys.argv[1], "big", "d%02d" % (i % 50))
	    os.makedirs(d, exist_ok=True)
	    open(os.path.join(d, "f%05d" % i), "w").write("%d\n" % i)
	PY
	(cd "$P" && "$GPURUN" sync -y 2>"$TRASH/err") && same_trees "$P" &&
	for f in d00/f00000 d13/f01013 d27/f04077 d31/f04081 d49/f05999; do
		echo changed >"$R/big/$f" || return 1
	done &&
	rm -r "$R/big/d40" && mv "$R/big/d41" "$TRASH/moved" && ln -s "$TRASH/moved" "$R/big/d41" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	for f in f00000 f01013 f04077 f04081 f05999 d40 d41; do
		test_grep "$f" "$TRASH/err" || return 1
	done &&
	test ! -L "$R/big/d41" && test -d "$R/big/d41" && same_trees "$P" &&
	test "$(ls "$TRASH/moved" | wc -l)" = 120
'

test_done
