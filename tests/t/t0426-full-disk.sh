#!/bin/bash
# A full disk on the host never turns a good exit into `lost` and never
# drops a job's output silently (issue 29): the jobs' folders live on a
# small tmpfs that the job itself fills.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj J=$HOME/.cache/gpurun/jobs
mkdir -p "$P" "$R" "$J"
ini() {
	write_ini "$P" local local "$R"
	printf '[build]\ncommand =\n[jobs]\nkeep = 0\n' >> "$P/gpurun.ini"
	for kv in "$@"; do printf '%s\n' "$kv"; done >> "$P/gpurun.ini"
}
# A line of 1000 bytes: "line N " and x's.
LINE='printf "line %s %0990d\n" $i 0'

test_expect_success 'setup: the jobs folder on a 16 MiB tmpfs' '
	mount -t tmpfs -o size=16m,mode=755 gpurun-t0426 "$J" &&
	test_atexit "umount -l \"$J\" 2>/dev/null"
'

test_expect_success 'a job that ends on a full disk keeps its exit status (3), not lost' '
	cd "$P" && rm -f "$J/fill" &&
	ini "[train]" "command = echo start; head -c 64M /dev/zero >$J/fill 2>/dev/null; exit 3" &&
	test_expect_code 3 "$GPURUN" train >out 2>err &&
	test_grep "exited with status 3" err && id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test -s "$J/fill" && "$GPURUN" status "$id" >st && test_grep "^$id  failed .* 3 " st &&
	rm -f "$J/fill" && "$GPURUN" status "$id" >st && test_grep "^$id  failed .* 3 " st
'

# A line is 997 to 999 bytes; the first line the disk refused may be in the
# log in part (written up to the byte that did not fit): it counts as missing
# though only its tail was lost, so the bound is one line below missing.
test_expect_success 'output lost to a full disk is counted in the log once there is room' '
	cd "$P" && rm -f "$J/fill" &&
	ini "[train]" "command = for i in \$(seq 1 100); do $LINE; if [ \$i = 30 ]; then head -c 64M /dev/zero >$J/fill 2>/dev/null; fi; if [ \$i = 60 ]; then rm -f $J/fill; fi; done" &&
	"$GPURUN" train >out 2>err && id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test_grep "^line 30 " out && test_grep "^line 100 " out &&
	test_grep "^\[gpurun\] [0-9]* bytes of output lost: no space left on the host" out &&
	"$GPURUN" logs "$id" >log && test_grep "bytes of output lost: no space left on the host" log &&
	lost=$(sed -n "s/^\[gpurun\] \([0-9]*\) bytes of output lost.*/\1/p" log) &&
	missing=$((100 - $(grep -c "^line [0-9]* 0*\$" log))) &&
	echo "lost=$lost missing=$missing" &&
	test "$missing" -gt 0 && test "$lost" -ge $(((missing - 1) * 997)) && test "$lost" -le $(((missing + 2) * 1002))
'

test_expect_success 'output lost with no room until the end: the job end says how much' '
	cd "$P" && rm -f "$J/fill" &&
	ini "[train]" "command = for i in \$(seq 1 40); do $LINE; if [ \$i = 20 ]; then head -c 64M /dev/zero >$J/fill 2>/dev/null; fi; done" &&
	"$GPURUN" train >out 2>err && id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test_grep "exited with status 0; [0-9]* bytes of its output were lost: no space left on the host" err &&
	"$GPURUN" status "$id" >st && test_grep "^$id  done " st &&
	test_grep "bytes of its output were lost" st && rm -f "$J/fill"
'

test_done
