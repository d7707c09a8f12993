#!/bin/bash
# What the model-based sync test (tests/sync_model.py, t0316) found, each
# as the smallest case that failed: names sync cannot carry, a file on the
# host replaced by a folder, entries replaced on the host that the project
# no longer has, a killed agent's manifest temp file, a fresh clone
# syncing to a folder changed on the host (the seed that found each is in
# its title; on main, cecc5ff, every case fails); and a signature from the
# host that did not parse.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/remote

same_trees() {
	tree_sig "$P" "$@" >"$TRASH/sig.a" && tree_sig "$R" >"$TRASH/sig.b" &&
	test_cmp "$TRASH/sig.a" "$TRASH/sig.b"
}

test_expect_success 'names starting .gpurun-tmp- are never sent, and the rest syncs (seeds 2, 4, 5)' '
	mkdir -p "$P/sub/.gpurun-tmp-dir" && write_ini "$P" local local "$R" &&
	echo a >"$P/a" && echo t >"$P/.gpurun-tmp-data-1" && echo t >"$P/sub/.gpurun-tmp-x" &&
	echo in >"$P/sub/.gpurun-tmp-dir/f" && echo b >"$P/sub/b" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && cat "$TRASH/err" &&
	! find "$R" -name ".gpurun-tmp-*" | grep -q . && test -f "$R/a" && test -f "$R/sub/b" &&
	tree_sig "$P" | grep -v "gpurun-tmp-" >"$TRASH/sig.a" && tree_sig "$R" >"$TRASH/sig.b" &&
	test_cmp "$TRASH/sig.a" "$TRASH/sig.b" && (cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	test_grep "up to date" "$TRASH/err"
'

test_expect_success 'a file replaced on the host by an empty folder is put back; a full one is reported (seed 6)' '
	rm -rf "$P"/.gpurun-tmp-* "$P"/sub/.gpurun-tmp-* && echo f >"$P/f1" && echo f >"$P/f2" &&
	(cd "$P" && "$GPURUN" -q sync) &&
	rm "$R/f1" && mkdir "$R/f1" && rm "$R/f2" && mkdir "$R/f2" && echo theirs >"$R/f2/out" &&
	(cd "$P" && test_expect_code 250 "$GPURUN" sync 2>"$TRASH/err") && cat "$TRASH/err" &&
	test -f "$R/f1" && test_grep "f2.*in the way" "$TRASH/err" && test -f "$R/f2/out" &&
	test_grep "^hint: move those files away on the host" "$TRASH/err" &&
	rm -r "$R/f2" && (cd "$P" && "$GPURUN" -q sync) && same_trees
'

# The host reported such an entry as gone, so nothing deleted it when the
# project no longer had it: the host kept a stray folder or symlink.
test_expect_success 'a file or folder deleted here and replaced on the host goes (seeds 1, 19, 21)' '
	mkdir -p "$P/gone-dir" "$TRASH/outside" && echo x >"$P/gone-dir/x" && echo y >"$P/gone-file" &&
	(cd "$P" && "$GPURUN" -q sync) &&
	rm -r "$R/gone-dir" && ln -s "$TRASH/outside" "$R/gone-dir" &&
	rm "$R/gone-file" && mkdir "$R/gone-file" &&
	rm -r "$P/gone-dir" "$P/gone-file" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && cat "$TRASH/err" &&
	! test -e "$R/gone-dir" && ! test -L "$R/gone-dir" && ! test -e "$R/gone-file" &&
	test -d "$TRASH/outside" && same_trees
'

test_expect_success 'a temp file a killed agent left in the host state folder goes at the next sync (seeds 16, 86)' '
	echo junk >"$R/.gpurun/.gpurun-tmp-999-1" && echo more >>"$P/a" &&
	(cd "$P" && "$GPURUN" -q sync) && ! test -e "$R/.gpurun/.gpurun-tmp-999-1" && same_trees
'

test_expect_success 'a clone without local state syncs to a folder changed on the host' '
	echo host-side >"$R/a" && rm -rf "$P/.gpurun" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && cat "$TRASH/err" && same_trees &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "up to date" "$TRASH/err"
'

# The local transport's agent is gpurun's child: a stopped one never acted
# on SIGTERM, and gpurun waited for it forever on its way out.
stalled_local_agent() {
	head -c 40000000 /dev/urandom >"$P/stall.bin" || return 1
	(cd "$P" && GPURUN_IO_TIMEOUT=3 timeout -k 5 120 "$GPURUN" sync --yes 2>"$TRASH/err"
	 echo $? >"$TRASH/rc") &
	bg=$!
	for _i in $(seq 1 3000); do
		find "$R" -name ".gpurun-tmp-*" 2>/dev/null | grep -q . && break
		sleep 0.01
	done
	agent=$(pgrep -f "$HOME/.cache/gpurun/agent-.* serve" | head -1)
	test -n "$agent" && kill -STOP "$agent" || return 1
	wait $bg
	kill -KILL "$agent" 2>/dev/null
	cat "$TRASH/err" >&2
	test "$(cat "$TRASH/rc")" = 255 && test_grep "nothing for 3 s" "$TRASH/err" &&
	(cd "$P" && "$GPURUN" -q sync --yes) && same_trees
}

test_expect_success 'an agent stopped over the local transport: gpurun gives up and exits (seed 302)' '
	stalled_local_agent
'

# The host's signature of a 500 kB file has 6-byte strong sums; the 44
# bytes of SIG's OK were taken as part of it, which then did not parse,
# and the file went whole.
test_expect_success 'a delta against a signature from the host (500 kB, delta_min 64k)' '
	head -c 500000 /dev/urandom >"$P/mid.bin" && (cd "$P" && "$GPURUN" -q sync) &&
	rm -rf "$P/.gpurun/sigs" &&
	python3 -c "import os,sys; f=open(sys.argv[1],\"r+b\"); f.seek(250000); f.write(os.urandom(4096))" "$P/mid.bin" &&
	(cd "$P" && "$GPURUN" -o sync.delta_min=64k sync --stats >"$TRASH/out" 2>"$TRASH/err") &&
	cat "$TRASH/out" && test_grep "1 as deltas" "$TRASH/out" && test_grep "1 signatures asked" "$TRASH/out" &&
	test "$(sed -n "s/^wire: \([0-9]*\) bytes.*/\1/p" "$TRASH/out")" -lt 100000 && same_trees
'

test_done
