#!/bin/bash
# An edit in a large file is not hashed whole again (issue 37): the
# client records each block's fingerprint (.gpurun/blocks, sync_fp.h) and
# hashes only the blocks whose fingerprint changed. Whatever it reuses,
# the host's copy must be the local file byte for byte; a damaged record
# only costs the shortcut; the records of files gone are removed.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/remote
mkdir -p "$P"
write_ini "$P" local local "$R"

# poke FILE OFFSET_KIB KIB: write KIB KiB of random bytes at OFFSET_KIB.
poke() {
	python3 -c 'import os,sys; f=open(sys.argv[1],"r+b"); f.seek(int(sys.argv[2])<<10); f.write(os.urandom(int(sys.argv[3])<<10))' "$@"
}
# The "N of them in blocks unchanged" count of sync --stats' output.
reused() { sed -n 's/^entries: .*bytes, \([0-9]*\) of them in blocks unchanged.*/\1/p' "$1"; }
sync_stats() { (cd "$P" && "$GPURUN" sync --yes --stats >"$TRASH/out" 2>"$TRASH/err") || { cat "$TRASH/err"; return 1; }; }

test_expect_success 'a large file sent whole leaves a record of its blocks' '
	head -c 64M /dev/urandom >"$P/big.bin" && echo small >"$P/small.txt" &&
	sync_stats && cmp "$P/big.bin" "$R/big.bin" &&
	test "$(ls "$P/.gpurun/blocks" | wc -l)" = 1
'

test_expect_success 'an edit of 1 MiB: only its blocks are hashed again; the copy is exact' '
	touch -d "-1 hour" "$P/big.bin" && poke "$P/big.bin" 20000 1024 &&
	sync_stats && cat "$TRASH/out" && test_grep "1 as deltas" "$TRASH/out" &&
	n=$(reused "$TRASH/out") && test "$n" -ge $((62 << 20)) && test "$n" -lt $((64 << 20)) &&
	cmp "$P/big.bin" "$R/big.bin"
'

test_expect_success 'edits, an append and a truncation in turn: the copy is exact each time' '
	for round in 1 2 3 4 5 6; do
		case $round in
		3) head -c 3M /dev/urandom >>"$P/big.bin" ;;
		5) truncate -s 60M "$P/big.bin" ;;
		*) poke "$P/big.bin" $((round * 7919 % 60000)) $((round * 13)) ;;
		esac
		sync_stats && cmp "$P/big.bin" "$R/big.bin" || return 1
	done
'

test_expect_success 'a damaged record is not used (the file is hashed whole) and is made again' '
	f=$(ls "$P/.gpurun/blocks") &&
	printf "\377\377" | dd of="$P/.gpurun/blocks/$f" bs=1 seek=300 conv=notrunc 2>/dev/null &&
	poke "$P/big.bin" 100 64 && sync_stats && test "$(reused "$TRASH/out")" = 0 &&
	cmp "$P/big.bin" "$R/big.bin" &&
	poke "$P/big.bin" 200 64 && sync_stats && test "$(reused "$TRASH/out")" -gt 0 &&
	cmp "$P/big.bin" "$R/big.bin" &&
	: >"$P/.gpurun/blocks/$f" && poke "$P/big.bin" 300 64 && sync_stats &&
	test "$(reused "$TRASH/out")" = 0 && cmp "$P/big.bin" "$R/big.bin"
'

test_expect_success 'a record of another file is not this one: renamed, hashed whole' '
	mv "$P/big.bin" "$P/big2.bin" && poke "$P/big2.bin" 400 64 && sync_stats &&
	cmp "$P/big2.bin" "$R/big2.bin" && test ! -e "$R/big.bin"
'

test_expect_success 'the records of files no longer there (or no longer large) are removed' '
	head -c 2M /dev/urandom >"$P/mid.bin" && sync_stats &&
	test "$(ls "$P/.gpurun/blocks" | wc -l)" = 2 &&
	rm "$P/big2.bin" && head -c 100K /dev/urandom >"$P/mid.bin" && sync_stats &&
	test "$(ls "$P/.gpurun/blocks" | wc -l)" = 0
'

test_done
