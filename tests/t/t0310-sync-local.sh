#!/bin/bash
# gpurun sync over the local transport (the byte stream is the same as over
# ssh): generated trees arrive exactly (content, mode, mtime, symlinks,
# empty folders, odd names), incremental changes of every kind, the no-op
# in one small exchange, --dry-run, the size check, changes made on the
# host behind gpurun's back, stray temp files.
. "$(dirname "$0")/../lib.sh"

# gen_tree DIR SEED N: N random entries (files of several sizes and modes,
# folders, empty folders, symlinks), names with spaces, newlines, non-UTF-8.
gen_tree() {
	python3 - "$1" "$2" "$3" <<'PY'
import os, random, sys
root, rnd, n = os.fsencode(sys.argv[1]), random.Random(int(sys.argv[2])), int(sys.argv[3])
names = [b'a', b'b c', b'd\ne', b'\xff\xfe', 'caf\u00e9'.encode(), b'x.py', b'-dash', b'...dots']
dirs = [b'']
os.makedirs(root, exist_ok=True)
for i in range(n):
    parent = rnd.choice(dirs)
    name = rnd.choice(names) + str(i).encode()
    rel = os.path.join(parent, name) if parent else name
    p, k = os.path.join(root, rel), rnd.random()
    if k < 0.15:
        os.makedirs(p)
        dirs.append(rel)
    elif k < 0.22:
        os.symlink(rnd.choice([b'../x', rel + b'.t', b'/etc/hostname', b'a b']), p)
    else:
        with open(p, 'wb') as f:
            if rnd.random() < 0.5:
                f.write(rnd.randbytes(rnd.choice([0, 1, 100, 5000, 70000])))
            else:
                f.write(b'line %d\n' % i * rnd.randint(0, 500))
        os.chmod(p, rnd.choice([0o644, 0o755, 0o600, 0o700, 0o444]))
PY
}

R=$TRASH/remote
P=$TRASH/proj

same_trees() {
	tree_sig "$P" >"$TRASH/sig.local" && tree_sig "$R" >"$TRASH/sig.remote" &&
	test_cmp "$TRASH/sig.local" "$TRASH/sig.remote"
}

wire_bytes() { sed -n 's/^wire: \([0-9]*\) bytes.*/\1/p' "$1"; }

# Entries with known names, for the incremental changes below.
fixed_tree() {
	mkdir -p "$P/empty/nested-empty" "$P/flip2" "$P/keepdir" &&
	echo edit-me >"$P/edit.txt" && echo delete-me >"$P/del.txt" &&
	echo rename-me >"$P/before" && echo mode >"$P/modeonly" && chmod 644 "$P/modeonly" &&
	echo time >"$P/touched" && echo file >"$P/flip1" && echo in >"$P/flip2/inner" &&
	ln -s target1 "$P/lnk" && ln -s somewhere "$P/link2file" && echo f >"$P/file2link"
}

test_expect_success 'first sync of a generated tree: content, modes, mtimes, links, empty folders' '
	gen_tree "$P" 1 300 && fixed_tree && write_ini "$P" local local "$R" &&
	(cd "$P" && GPURUN_TRACE=1 "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") &&
	test_grep "^synced [0-9]* files (0 deleted), .* on the wire" "$TRASH/err" &&
	test_grep "the host holds nothing: all of it from the spool" "$TRASH/err" &&
	same_trees && test -d "$R/empty/nested-empty" && test "$(readlink "$R/lnk")" = target1
'

test_expect_success 'no-op sync: one small exchange, nothing sent' '
	(cd "$P" && "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") &&
	test_grep "synced 0 files (0 deleted).*(up to date)" "$TRASH/err" &&
	test "$(wire_bytes "$TRASH/out")" -le 2048 &&
	same_trees
'

test_expect_success 'incremental changes of every kind, in one sync' '
	cd "$P" && echo more >>edit.txt && rm del.txt && mv before after &&
	echo added >added.txt && mkdir -p newdir/sub emptynew && echo deep >newdir/sub/f &&
	chmod 755 modeonly && touch -d "2001-02-03 04:05:06.123456789" touched &&
	rm flip1 && mkdir flip1 && echo now-dir >flip1/f &&
	rm -r flip2 && echo now-file >flip2 &&
	rm lnk && ln -s target2 lnk && rm link2file && echo real >link2file &&
	rm file2link && ln -s elsewhere file2link && rm -r empty/nested-empty &&
	"$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err" && cd "$TRASH" &&
	test_grep "^synced .* (6 deleted)" "$TRASH/err" && test_grep "2 updated" "$TRASH/out" &&
	same_trees &&
	test "$(readlink "$R/lnk")" = target2 && test -f "$R/link2file" &&
	test "$(readlink "$R/file2link")" = elsewhere &&
	test -d "$R/flip1" && test -f "$R/flip2" && ! test -e "$R/before" &&
	test -x "$R/modeonly" && ! test -e "$R/empty/nested-empty" && test -d "$R/emptynew" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err"
'

test_expect_success 'a second generated tree replaces the first (mass add and delete)' '
	find "$P" -mindepth 1 -maxdepth 1 ! -name .gpurun -exec rm -rf {} + &&
	gen_tree "$P" 2 200 && write_ini "$P" local local "$R" &&
	(cd "$P" && "$GPURUN" sync >"$TRASH/out" 2>"$TRASH/err") && same_trees &&
	(cd "$P" && "$GPURUN" sync >"$TRASH/out" 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err"
'

test_expect_success '--dry-run lists what would change and changes nothing' '
	cd "$P" && echo dry >dry-new && printf "q\n" >"dry name
with newline" && rm -f gpurun.ini.bak && touch -d "1999-01-01" gpurun.ini &&
	tree_sig "$R" >"$TRASH/before" &&
	"$GPURUN" sync --dry-run >"$TRASH/list" 2>"$TRASH/err" && cd "$TRASH" &&
	test_grep -x "send dry-new" "$TRASH/list" &&
	test_grep -x "send \"dry name\\\\nwith newline\"" "$TRASH/list" &&
	test_grep -x "update gpurun.ini" "$TRASH/list" &&
	tree_sig "$R" >"$TRASH/after" && test_cmp "$TRASH/before" "$TRASH/after" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && same_trees
'

test_expect_success 'deletion is listed by --dry-run, then done' '
	rm "$P/dry-new" && (cd "$P" && "$GPURUN" sync -n >"$TRASH/list") &&
	test_grep -x "delete dry-new" "$TRASH/list" && test -f "$R/dry-new" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && ! test -e "$R/dry-new" && same_trees
'

test_expect_success '-q silences the summary' '
	echo q >>"$P/dry name
with newline" && (cd "$P" && "$GPURUN" -q sync >"$TRASH/out" 2>"$TRASH/err") &&
	! test -s "$TRASH/out" && ! test -s "$TRASH/err" && same_trees
'

test_expect_success 'a file changed on the host is noticed and overwritten' '
	echo local-version >"$P/hostedit" && echo added >"$P/added.txt" &&
	(cd "$P" && "$GPURUN" -q sync) &&
	echo changed-by-someone >"$R/hostedit" && rm -f "$R/added.txt" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	test_grep "gpurun: hostedit changed on the host since the last sync; overwriting" "$TRASH/err" &&
	test_grep "gpurun: added.txt was deleted on the host since the last sync; sending it again" "$TRASH/err" &&
	same_trees &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err" && ! grep changed "$TRASH/err"
'

test_expect_success 'a host change is reported also when files changed here (the optimistic send is refused)' '
	echo v1 >"$P/both" && (cd "$P" && "$GPURUN" -q sync) &&
	echo host-side >"$R/both" && echo local-change >>"$P/edit.txt" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	test_grep "gpurun: both changed on the host since the last sync; overwriting" "$TRASH/err" &&
	same_trees
'

test_expect_success 'the size check refuses in a pipe without --yes, shows the largest folders' '
	mkdir -p "$P/bulk/inner" && head -c 300000 /dev/urandom >"$P/bulk/inner/blob" &&
	head -c 100000 /dev/urandom >"$P/other.bin" &&
	(cd "$P" && test_expect_code 249 "$GPURUN" -o sync.warn_size=100k sync </dev/null 2>"$TRASH/err") &&
	test_grep "more than \[sync\] warn_size" "$TRASH/err" && test_grep "bulk/" "$TRASH/err" &&
	test_grep "pass --yes" "$TRASH/err" && ! test -e "$R/bulk" &&
	(cd "$P" && "$GPURUN" -o sync.warn_size=100k sync --yes 2>"$TRASH/err") && same_trees
'

test_expect_success 'stray temp files of a killed agent are removed by the next sync' '
	mkdir -p "$P/tdir/sub" && (cd "$P" && "$GPURUN" -q sync) &&
	echo junk >"$R/tdir/sub/.gpurun-tmp-999-1" && echo junk >"$R/.gpurun-tmp-999-2" &&
	printf "tdir/sub\0\0" >"$R/.gpurun/sync-journal" &&
	echo more >>"$P/added.txt" && (cd "$P" && "$GPURUN" -q sync) &&
	! test -e "$R/tdir/sub/.gpurun-tmp-999-1" && ! test -e "$R/.gpurun-tmp-999-2" &&
	! test -e "$R/.gpurun/sync-journal" &&
	same_trees
'

test_expect_success 'two clones syncing into one folder: each notices the other and converges' '
	C2=$TRASH/clone2 && mkdir -p "$C2" &&
	(cd "$P" && tar cf - --exclude=./.gpurun .) | (cd "$C2" && tar xf -) &&
	echo from-clone2 >"$C2/only-in-clone2" && echo edited-in-2 >>"$C2/edit.txt" &&
	(cd "$C2" && "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") &&
	tree_sig "$C2" >"$TRASH/c2.sig" && tree_sig "$R" >"$TRASH/r.sig" &&
	test_cmp "$TRASH/c2.sig" "$TRASH/r.sig" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && same_trees && ! test -e "$R/only-in-clone2" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err"
'

# A clone whose remote-KEY is stale (another clone synced since) gets
# the host's manifest: the walk it read against remote-KEY is read
# against that as a stream (a no-op walk, and one with an edit, whose
# optimistic send the host refuses), and only what differs is held
# (here every file's mtime: tar kept whole seconds only). The large file
# edited: its block hashes, made for the refused send, are let go.
test_expect_success 'another clone synced since: the walk is read against the host manifest, no list' '
	C3=$TRASH/clone3 && mkdir -p "$C3" &&
	(cd "$P" && tar cf - --exclude=./.gpurun .) | (cd "$C3" && tar xf -) &&
	echo from-clone3 >"$C3/only-in-clone3" && head -c 3000000 /dev/urandom >"$C3/big.dat" &&
	(cd "$C3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "the spool read against the host.s manifest" "$TRASH/out" &&
	(cd "$P" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "the walk read against the host.s manifest: [0-9]* entries, [0-9]* differ, some gone" "$TRASH/out" &&
	test_grep "only what differs: " "$TRASH/out" &&
	! grep "local made" "$TRASH/out" && same_trees && ! test -e "$R/only-in-clone3" &&
	echo clone3-edit >>"$C3/edit.txt" && head -c 300000 /dev/urandom >>"$C3/big.dat" &&
	(cd "$C3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "the walk read against the host.s manifest: [0-9]* entries, [0-9]* differ" "$TRASH/out" &&
	! grep "local made" "$TRASH/out" &&
	tree_sig "$C3" >"$TRASH/c3.sig" && tree_sig "$R" >"$TRASH/r.sig" &&
	test_cmp "$TRASH/c3.sig" "$TRASH/r.sig" &&
	(cd "$C3" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && same_trees &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err"
'

test_expect_success 'ignored files stay home; --why names the rule' '
	mkdir -p "$P/build" "$P/sub" && echo o >"$P/build/x.o" && echo o >"$P/top.o" &&
	echo keep >"$P/sub/keep.o" && echo secret >"$P/notes.tmp" && echo c >"$P/data.cache" &&
	printf "build/\n*.o\n" >"$P/.gitignore" && printf "!keep.o\n" >"$P/sub/.gitignore" &&
	printf "*.tmp\n" >"$P/.gpurunignore" &&
	printf "[sync]\nexclude = *.cache\n" >>"$P/gpurun.ini" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	! test -e "$R/build" && ! test -e "$R/top.o" && test -f "$R/sub/keep.o" &&
	! test -e "$R/notes.tmp" && ! test -e "$R/data.cache" && test -f "$R/.gitignore" &&
	(cd "$P" && "$GPURUN" sync --why build/x.o >"$TRASH/why") &&
	test_grep "ignored: .build/x.o.*\.gitignore:1" "$TRASH/why" &&
	(cd "$P" && "$GPURUN" sync --why sub/keep.o >"$TRASH/why") &&
	test_grep "synced: .sub/keep.o" "$TRASH/why"
'

test_expect_success 'a file that becomes ignored stays on the host (as rsync --delete spares excluded files)' '
	echo will-be-ignored >"$P/later.log" && (cd "$P" && "$GPURUN" -q sync) &&
	test -f "$R/later.log" && echo "*.log" >>"$P/.gitignore" &&
	(cd "$P" && "$GPURUN" sync -n >"$TRASH/list") && ! grep "later.log" "$TRASH/list" &&
	(cd "$P" && "$GPURUN" -q sync) && test -f "$R/later.log" && test -f "$P/later.log" &&
	(cd "$P" && "$GPURUN" sync --why later.log >"$TRASH/why") &&
	test_grep "stays on the host" "$TRASH/why" &&
	(cd "$P" && "$GPURUN" sync 2>&1 | grep "^synced") >"$TRASH/again" && test_grep "up to date" "$TRASH/again"
'

test_expect_success 'a folder holding files gpurun did not send is kept, and said so' '
	mkdir -p "$P/gone/x" && echo 1 >"$P/gone/x/f" && (cd "$P" && "$GPURUN" -q sync) &&
	echo host-output >"$R/gone/x/result.log" && rm -r "$P/gone" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	test_grep "kept folder .gone/x. on the host" "$TRASH/err" &&
	test -f "$R/gone/x/result.log" && ! test -e "$R/gone/x/f"
'

# The scan comes in path order but for a folder entered only to reach the
# files git tracks in it: that one comes with them, before siblings whose
# names sort between "out" and "out/" ("out.txt", "out-x"). The sync's
# list sorts itself then.
test_expect_success 'tracked files in an ignored folder beside siblings named like it' '
	P2=$TRASH/proj2 R2=$TRASH/remote2 && mkdir -p "$P2/out" "$P2/out-x" &&
	(cd "$P2" && git init -q . && printf "out/\n" >.gitignore &&
	 echo t >out/tracked.txt && echo i >out/ignored.bin && echo s >out.txt &&
	 echo x >out-x/f && git add .gitignore && git add -f out/tracked.txt) &&
	write_ini "$P2" local local "$R2" &&
	(cd "$P2" && "$GPURUN" -q sync) &&
	test_grep -x t "$R2/out/tracked.txt" && ! test -e "$R2/out/ignored.bin" &&
	test_grep -x s "$R2/out.txt" && test_grep -x x "$R2/out-x/f" &&
	(cd "$P2" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err"
'

# A walked no-op reads the tree against the index and what the last sync
# left on the host, and keeps no list (sync_diff.c). Files written just
# before a sync are hashed again at the next (the index cannot vouch for
# them yet): then the index is renewed, and the one after hashes nothing.
# A file that became ignored stays on the host and the no-op stays one;
# a file changed on the host after a no-op is put back.
test_expect_success 'a no-op keeps no list; files written just before a sync are hashed once more, then trusted' '
	P3=$TRASH/proj3 R3=$TRASH/remote3 && mkdir -p "$P3/src" && git init -q "$P3" &&
	for i in $(seq 40); do echo "$i" >"$P3/src/f$i.py"; done &&
	write_ini "$P3" local local "$R3" &&
	(cd "$P3" && "$GPURUN" -q sync) && sleep 1.1 &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") &&
	test_grep "walked against the state: 42 entries, 0 differ" "$TRASH/err" &&
	! grep "made whole" "$TRASH/err" && test_grep "up to date" "$TRASH/out" "$TRASH/err" &&
	test_grep "(41 files hashed" "$TRASH/out" &&
	(cd "$P3" && "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "(0 files hashed" "$TRASH/out" && test_grep "41 from the cache" "$TRASH/out" &&
	echo "src/f3.py" >>"$P3/.git/info/exclude" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "up to date" "$TRASH/out" && ! grep "made whole" "$TRASH/out" &&
	test_grep -x 3 "$R3/src/f3.py" &&
	echo host >"$R3/src/f7.py" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "the host changed since the state (1 changed, 0 gone): 1 entries here, 1 of the state.s, 1 of the host.s" "$TRASH/out" &&
	! grep "made whole" "$TRASH/out" && test_grep -x 7 "$R3/src/f7.py" &&
	test_grep -x 3 "$R3/src/f3.py" &&
	(cd "$P3" && "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "up to date" "$TRASH/out" && test_grep "(0 files hashed" "$TRASH/out"
'

# (proj3 as the case above left it: synced, src/f3.py ignored here)
test_expect_success 'an edit plans on what differs alone; the state and the index it leaves are whole' '
	echo one >>"$P3/src/f1.py" && rm "$P3/src/f2.py" && mkdir "$P3/src/new" &&
	echo g >"$P3/src/new/g.py" && echo "src/f4.py" >>"$P3/.git/info/exclude" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "only what differs: 3 entries here, 2 of the state" "$TRASH/out" &&
	! grep -e "made whole" -e "walking again" "$TRASH/out" &&
	test_cmp "$P3/src/f1.py" "$R3/src/f1.py" && test_cmp "$P3/src/new/g.py" "$R3/src/new/g.py" &&
	! test -e "$R3/src/f2.py" && test_grep -x 4 "$R3/src/f4.py" &&
	test_grep -x 3 "$R3/src/f3.py" &&
	sleep 1.1 && (cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "walked against the state: 41 entries, 0 differ" "$TRASH/out" &&
	test_grep "up to date" "$TRASH/out" &&
	(cd "$P3" && "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "(0 files hashed" "$TRASH/out" && test_grep "39 from the cache" "$TRASH/out" &&
	echo host >"$R3/src/f5.py" && echo two >>"$P3/src/f6.py" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "only what differs: 1 entries here, 1 of the state" "$TRASH/out" &&
	test_grep "the host changed since the state (1 changed, 0 gone): 2 entries here" "$TRASH/out" &&
	! grep -e "made whole" -e "walking again" "$TRASH/out" &&
	test_grep -x 5 "$R3/src/f5.py" && test_cmp "$P3/src/f6.py" "$R3/src/f6.py" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "up to date" "$TRASH/out" && ! grep "only what differs" "$TRASH/out"
'

# Issue 36: the host changed behind gpurun's back (its changes come, not
# its manifest): only the paths it changed join what differs, and what
# it keeps that is ignored here stays. (proj3 as the case above left it:
# src/f3.py and src/f4.py ignored here, on the host as last sent.) The
# agent reports changes to what it holds; files new there are not its.
test_expect_success 'the host changed since the last sync: planned on the paths it changed, no list' '
	echo host >"$R3/src/f8.py" && rm "$R3/src/f9.py" && echo x >"$R3/src/f3.py" &&
	rm -r "$R3/src/new" && echo three >>"$P3/src/f10.py" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "only what differs: 1 entries here, 1 of the state" "$TRASH/out" &&
	test_grep "the host changed since the state (2 changed, 2 gone): 6 entries here, 6 of the state.s, 3 of the host.s" "$TRASH/out" &&
	! grep -e "made whole" -e "walking again" "$TRASH/out" &&
	test_grep "src/f8.py changed on the host since the last sync; overwriting" "$TRASH/out" &&
	test_grep "src/f9.py was deleted on the host since the last sync; sending it again" "$TRASH/out" &&
	test_grep "src/new was deleted on the host since the last sync; sending it again" "$TRASH/out" &&
	! grep "src/f3.py" "$TRASH/out" &&
	test_grep -x 8 "$R3/src/f8.py" && test_grep -x 9 "$R3/src/f9.py" &&
	test_grep -x g "$R3/src/new/g.py" && test_cmp "$P3/src/f10.py" "$R3/src/f10.py" &&
	test_grep -x x "$R3/src/f3.py" && test_grep -x 4 "$R3/src/f4.py" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "up to date" "$TRASH/out" && ! grep "only what differs" "$TRASH/out" &&
	echo gone >"$R3/src/f4.py" && rm "$R3/src/f3.py" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "the host changed since the state (1 changed, 1 gone): 1 entries here, 2 of the state.s, 1 of the host.s" "$TRASH/out" &&
	! grep "made whole" "$TRASH/out" &&
	test_grep -x gone "$R3/src/f4.py" && ! test -e "$R3/src/f3.py" &&
	(cd "$P3" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "up to date" "$TRASH/out"
'

# A first sync keeps no list of the tree either (sync_first.h): the walk
# goes to a spool in .gpurun and, to a host that holds nothing, is sent
# from it a window of 4,096 entries at a time (here 9,014 entries, three
# windows; "a.txt" and "a-x" come between the folder "a" and what it
# holds). What it leaves is whole: remote-KEY (the next sync is a
# walked no-op), the index (the one after hashes nothing) and the large
# file's signature. Without remote-KEY, to a host that holds the tree,
# the spool's digest finds it up to date and remote-KEY is written from
# the spool; to a host that holds a tree it does not know (.gpurun
# gone), the spool is read against the host's manifest, each file of
# the same size there hashed once, and only what differs is held and
# sent; what it hashed is in the index (the next sync hashes only the
# file sent, racily new; the one after, none).
test_expect_success 'a first sync sends from a spool a window at a time; what it leaves is whole' '
	P4=$TRASH/proj4 R4=$TRASH/remote4 && git init -q "$P4" &&
	python3 -c "import os,sys
for d in \"a\", \"b\", \"c\":
    os.makedirs(os.path.join(sys.argv[1], d, \"e\"))
    for i in range(3000):
        open(os.path.join(sys.argv[1], d, \"e\" if i % 2 else \"\", \"f%d\" % i), \"w\").write(str(i))" "$P4" &&
	mkdir -p "$P4/empty/inner" "$P4/a-x" && ln -s a/f0 "$P4/lnk" &&
	echo t >"$P4/a.txt" && echo y >"$P4/a-x/y" &&
	head -c 3000000 /dev/urandom >"$P4/big.bin" && write_ini "$P4" local local "$R4" &&
	(cd "$P4" && GPURUN_TRACE=1 "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "scanned into the spool: 9014 entries" "$TRASH/out" &&
	test_grep "the host holds nothing: all of it from the spool" "$TRASH/out" &&
	test_grep "^synced 9014 files (0 deleted)" "$TRASH/out" &&
	! grep "local made" "$TRASH/out" &&
	tree_sig "$P4" .git >"$TRASH/sig.local" && tree_sig "$R4" >"$TRASH/sig.remote" &&
	test_cmp "$TRASH/sig.local" "$TRASH/sig.remote" &&
	test "$(ls "$P4/.gpurun/sigs" | wc -l)" = 1 &&
	sleep 1.1 && (cd "$P4" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "walked against the state: 9014 entries, 0 differ" "$TRASH/out" &&
	test_grep "up to date" "$TRASH/out" &&
	(cd "$P4" && "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "(0 files hashed" "$TRASH/out" && test_grep "9004 from the cache" "$TRASH/out" &&
	rm "$P4"/.gpurun/remote-* &&
	(cd "$P4" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "scanned into the spool" "$TRASH/out" && test_grep "up to date" "$TRASH/out" &&
	! grep -e "all of it from the spool" -e "local made" "$TRASH/out" &&
	ls "$P4"/.gpurun/remote-* &&
	(cd "$P4" && GPURUN_TRACE=1 "$GPURUN" sync >"$TRASH/out" 2>&1) &&
	test_grep "walked against the state: 9014 entries, 0 differ" "$TRASH/out" &&
	rm -r "$P4/.gpurun" "$R4/b/f4" && echo changed >"$P4/c/f6" &&
	(cd "$P4" && GPURUN_TRACE=1 "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "the spool read against the host.s manifest: 9014 entries, 2 differ" "$TRASH/out" &&
	test_grep "only what differs: 2 entries here, 1 of the state.s" "$TRASH/out" &&
	test_grep "b/f4 was deleted on the host since the last sync; sending it again" "$TRASH/out" &&
	test_grep "^synced 2 files (0 deleted)" "$TRASH/out" &&
	test_grep "(9002 files hashed" "$TRASH/out" &&
	! grep -e "all of it from the spool" -e "local made" "$TRASH/out" &&
	tree_sig "$P4" .git >"$TRASH/sig.local" && tree_sig "$R4" >"$TRASH/sig.remote" &&
	test_cmp "$TRASH/sig.local" "$TRASH/sig.remote" &&
	sleep 1.1 && (cd "$P4" && GPURUN_TRACE=1 "$GPURUN" sync --stats >"$TRASH/out" 2>&1) &&
	test_grep "walked against the state: 9014 entries, 0 differ" "$TRASH/out" &&
	test_grep "up to date" "$TRASH/out" &&
	test_grep "(1 files hashed" "$TRASH/out" &&
	(cd "$P4" && "$GPURUN" sync --stats >"$TRASH/err" 2>&1) && test_grep "up to date" "$TRASH/err" &&
	test_grep "(0 files hashed" "$TRASH/err" && test_grep "9004 from the cache" "$TRASH/err"
'

test_done
