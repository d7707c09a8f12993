#!/bin/bash
# A walked sync leaves the agent's manifest in its file (issue 36: memory
# flat in the tree): OPEN checks it against the disk as a stream, a block
# of 4,096 entries at a time, and COMMIT writes the next one as a stream
# with the session's changes applied on the way. What that must keep: a
# damaged manifest is rebuilt, host changes in any block (a folder gone
# across a block's edge, a file become a folder) are found, said and
# undone, a fresh clone's dry run gets the host's list with the changes
# found (not yet written), mode and time changes reach the host, and a
# delta is still made against a large file.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/remote
M=$R/.gpurun/sync-manifest

same_trees() {
	tree_sig "$1" >"$TRASH/sig.a" && tree_sig "$2" >"$TRASH/sig.b" &&
	test_cmp "$TRASH/sig.a" "$TRASH/sig.b"
}
sync_in() { # sync_in DIR [ARGS]: stderr in $TRASH/err
	local d=$1
	shift
	(cd "$d" && timeout -k 5 300 "$GPURUN" sync --yes "$@" 2>"$TRASH/err")
	local rc=$?
	cat "$TRASH/err" >&2
	return $rc
}

test_expect_success 'setup: 9,000 files in three folders (more than two blocks)' '
	python3 - "$P" <<-\PY &&
	import os, sys
	for d in ("a", "b", "c"):
	    os.makedirs(os.path.join(sys.argv[1], d), exist_ok=True)
	    for i in range(3000):
	        with open(os.path.join(sys.argv[1], d, "f%05d.py" % i), "w") as f:
	            f.write("%s %d\n" % (d, i))
	PY
	head -c 300000 /dev/urandom >"$P/big.bin" &&
	write_ini "$P" local local "$R" && sync_in "$P" && same_trees "$P" "$R" &&
	sync_in "$P" && test_grep "up to date" "$TRASH/err"
'

test_expect_success 'host changes in every block: a folder gone across a block edge, a file now a folder' '
	rm -rf "$R/b" && rm "$R/a/f00007.py" && mkdir "$R/a/f00007.py" &&
	echo changed >"$R/c/f02999.py" && chmod 600 "$R/c/f00001.py" &&
	sync_in "$P" &&
	test_grep "b.* on the host" "$TRASH/err" && test_grep "c/f02999.py changed on the host" "$TRASH/err" &&
	same_trees "$P" "$R" && sync_in "$P" && test_grep "up to date" "$TRASH/err"
'

test_expect_success 'a fresh clone'"'"'s dry run gets the host'"'"'s list with its changes, which stay unwritten' '
	echo changed >"$R/a/f00100.py" && rm "$R/c/f00200.py" &&
	cp -a "$M" "$TRASH/man.before" &&
	mkdir -p "$TRASH/clone" && cp -a "$P"/. "$TRASH/clone/" && rm -rf "$TRASH/clone/.gpurun" &&
	sync_in "$TRASH/clone" --dry-run >"$TRASH/dry" &&
	cmp "$M" "$TRASH/man.before" &&
	test_grep "a/f00100.py" "$TRASH/dry" && test_grep "c/f00200.py" "$TRASH/dry" &&
	test $(grep -c "f0" "$TRASH/dry") -le 4 &&
	sync_in "$TRASH/clone" && same_trees "$TRASH/clone" "$R" &&
	sync_in "$P" && same_trees "$P" "$R"
'

test_expect_success 'mode and time changes alone reach the host' '
	chmod 700 "$P/a/f00003.py" && touch -d "2020-01-02 03:04:05" "$P/c/f00004.py" &&
	sync_in "$P" && same_trees "$P" "$R" &&
	test "$(stat -c %a "$R/a/f00003.py")" = 700 &&
	test "$(stat -c %Y "$R/c/f00004.py")" = "$(stat -c %Y "$P/c/f00004.py")" &&
	sync_in "$P" && test_grep "up to date" "$TRASH/err"
'

test_expect_success 'a large file still goes as a delta against the host'"'"'s version' '
	printf "edit" | dd of="$P/big.bin" bs=1 seek=1000 conv=notrunc 2>/dev/null &&
	(cd "$P" && "$GPURUN" -o sync.delta_min=64k sync --yes --stats >"$TRASH/out" 2>"$TRASH/err") &&
	cat "$TRASH/out" && test_grep "1 as deltas" "$TRASH/out" && same_trees "$P" "$R"
'

test_expect_success 'a damaged manifest (cut short, or garbage) is said, rebuilt, and the host is right' '
	truncate -s $(( $(stat -c %s "$M") / 2 )) "$M" &&
	echo late >>"$P/a/f00005.py" &&
	sync_in "$P" && test_grep "damaged; rebuilding" "$TRASH/err" && same_trees "$P" "$R" &&
	sync_in "$P" && test_grep "up to date" "$TRASH/err" &&
	head -c 5000 /dev/urandom >"$M" &&
	sync_in "$P" && test_grep "damaged; rebuilding" "$TRASH/err" && same_trees "$P" "$R" &&
	sync_in "$P" && test_grep "up to date" "$TRASH/err"
'

# A first sync of more files than a run holds (8,192): the agent's
# pending records go to disk in sorted runs, COMMIT puts the files in
# place from them and merges them into the manifest. One file cannot be
# put in place (the host has a folder of its own there): it is said,
# left out of the manifest, and said again next time; the rest is exact.
test_expect_success 'a first sync past a run of pending files (20,000), one of them refused' '
	Q=$TRASH/many && R2=$TRASH/remote-many &&
	python3 - "$Q" <<-\PY &&
	import os, sys
	for i in range(20000):
	    d = os.path.join(sys.argv[1], "m%02d" % (i % 37))
	    os.makedirs(d, exist_ok=True)
	    with open(os.path.join(d, "g%05d.txt" % i), "w") as f:
	        f.write("%d\n" % i)
	PY
	mkdir -p "$R2/m05/g00005.txt" && echo mine >"$R2/m05/g00005.txt/keep" &&
	write_ini "$Q" local local "$R2" && ! sync_in "$Q" &&
	test_grep "m05/g00005.txt" "$TRASH/err" && test_grep "mine\|keep\|not empty\|folder" "$TRASH/err" &&
	test -f "$R2/m19/g19999.txt" && test -f "$R2/m00/g00000.txt" &&
	test "$(find "$R2" -name "g*.txt" -type f | wc -l)" = 19999 &&
	! ls -a "$R2"/m*/ | grep -q "^\.gpurun-" &&
	rm -rf "$R2/m05/g00005.txt" && sync_in "$Q" && same_trees "$Q" "$R2" &&
	sync_in "$Q" && test_grep "up to date" "$TRASH/err"
'

test_done
