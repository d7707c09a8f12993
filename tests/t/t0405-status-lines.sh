#!/bin/bash
# gpurun's own status lines while a job's log streams (periodic pulls,
# reconnects) go to stderr, short and relative ("pulled 1 file to
# runs/ID/"), and never split a line of the log: with stdout and stderr
# in one file, every line the job wrote in two halves is still whole.
# Also `sync --dry-run`'s totals and the warning for a mistyped GPURUN_*.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R"
write_ini "$P" local local "$R"
stop_all() {
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" { print $1 }' |
		while read -r j; do "$GPURUN" -q stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

# Each line is written in two halves 1.2 s apart and a new artifact appears
# with each: the pulls (every second) end while the log is mid-line.
cat >>"$P/gpurun.ini" <<'INI'
[build]
command =
[train]
command = for i in 1 2 3 4 5; do printf "part-a-$i "; echo $i >"$GPURUN_JOB_DIR/art$i.bin"; sleep 1.2; printf "part-b-$i\n"; done
[artifacts]
pull = *.bin
interval = 1
INI

test_expect_success 'pull lines wait for the end of the log line, and are short and relative' '
	cd "$P" && "$GPURUN" train >"$TRASH/both" 2>&1 && cat "$TRASH/both" &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test_grep -E "^gpurun: pulled [0-9]+ files? to runs/$id/\$" "$TRASH/both" &&
	whole=0 && for i in 1 2 3 4 5; do grep -qx "part-a-$i part-b-$i" "$TRASH/both" && whole=$((whole + 1)); done &&
	test $whole = 5 && ! grep -q "$TRASH" "$TRASH/both"
'

test_expect_success 'the pulls did happen while the job ran (not only at the end)' '
	test $(grep -c "^gpurun: pulled" "$TRASH/both") -ge 2
'

test_expect_success 'sync --dry-run: bytes to send and files to delete, with totals' '
	cd "$P" && echo old >old2.txt && "$GPURUN" -q sync && rm old2.txt &&
	head -c 3000000 /dev/zero >big.dat && echo hi >small.txt &&
	"$GPURUN" sync --dry-run >"$TRASH/list" 2>"$TRASH/err" && cat "$TRASH/list" "$TRASH/err" &&
	test_grep -x "send big.dat" "$TRASH/list" && test_grep -x "delete old2.txt" "$TRASH/list" &&
	test_grep "^would send 2 files, 2.9 MiB; delete 1; update 0" "$TRASH/err" &&
	! test -e "$R/big.dat" && test -e "$R/old2.txt"
'

test_expect_success 'a mistyped GPURUN_* variable warns with a did-you-mean' '
	cd "$P" && GPURUN_TRAIN_COMAND=x "$GPURUN" config train.command >out 2>err &&
	test_grep "warning: GPURUN_TRAIN_COMAND is not a variable gpurun reads; did you mean GPURUN_TRAIN_COMMAND?" err &&
	GPURUN_TRACEE=1 "$GPURUN" config remote.host 2>err >/dev/null &&
	test_grep "did you mean GPURUN_TRACE?" err &&
	GPURUN_SYNC_WHATEVER=1 "$GPURUN" config remote.host 2>err >/dev/null &&
	test_grep "GPURUN_SYNC_WHATEVER is not a variable gpurun reads" err
'

test_expect_success 'variables gpurun reads, and ones like nothing of ours, are not warned about' '
	cd "$P" && GPURUN_SKIP_HOOK=1 GPURUN_TRAIN_GPUS=1 GPURUN_TEST_BIG=1 GPURUN_BUILD=x \
		"$GPURUN" config remote.host >out 2>err &&
	! test -s err && test_grep -x local out &&
	GPURUN_TRAIN_COMAND=x "$GPURUN" -q config remote.host >out 2>err && ! test -s err
'

test_done
