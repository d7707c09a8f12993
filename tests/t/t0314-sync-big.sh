#!/bin/bash
# Files past 4 GiB: a 5 GiB sparse file with data in it past the 4 GiB mark
# goes over (first as part of the tar, then changed in place as a delta)
# and arrives equal, still sparse. It hashes and moves 5 GiB, so it runs
# only when asked: GPURUN_TEST_BIG=1.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/remote

if [ -z "${GPURUN_TEST_BIG:-}" ]; then
	test_skip 'a 5 GiB sparse file, whole then as a delta' 'reads and hashes 5 GiB; set GPURUN_TEST_BIG=1'
	test_done
fi

# at OFFSET_MIB write 1 MiB of random bytes into FILE
poke() {
	python3 -c 'import os,sys; f=open(sys.argv[1],"r+b"); f.seek(int(sys.argv[2])<<20); f.write(os.urandom(1<<20))' "$1" "$2"
}

test_expect_success 'a 5 GiB sparse file, whole then as a delta' '
	mkdir -p "$P" && write_ini "$P" local local "$R" && truncate -s 5G "$P/huge.bin" &&
	poke "$P/huge.bin" 4700 && echo small >"$P/small.txt" &&
	(cd "$P" && "$GPURUN" sync --yes --stats >"$TRASH/out" 2>"$TRASH/err") &&
	test "$(stat -c %s "$R/huge.bin")" = 5368709120 && cmp "$P/huge.bin" "$R/huge.bin" &&
	test "$(du -k "$R/huge.bin" | cut -f1)" -lt 100000 &&
	poke "$P/huge.bin" 4900 &&
	(cd "$P" && "$GPURUN" sync --yes --stats >"$TRASH/out" 2>"$TRASH/err") &&
	cat "$TRASH/out" && test_grep "1 as deltas" "$TRASH/out" &&
	test "$(sed -n "s/^wire: \([0-9]*\) bytes.*/\1/p" "$TRASH/out")" -lt 3000000 &&
	cmp "$P/huge.bin" "$R/huge.bin"
'

test_done
