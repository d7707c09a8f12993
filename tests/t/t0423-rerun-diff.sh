#!/bin/bash
# gpurun rerun and gpurun diff over a real sshd (libssh2): a rerun runs
# the old job's snapshot after the local tree changed and was synced,
# with its words, environment and name, under a new id whose record says
# rerun_of; it does not sync, does not wait for an --after job again,
# keeps a sweep job's variables; a removed job is refused. diff shows
# exactly the edited file's change, an added and a removed file, a
# binary file and a mode change, the config's differences with env names
# only (never a value); --stat; a job and its rerun do not differ.
. "$(dirname "$0")/../lib.sh"

start_sshd gpuhost || { test_skip 'rerun and diff over ssh' 'sshd could not start here'; test_done; }
trust_sshd gpuhost
P=$TRASH/proj
mkdir -p "$P"
write_ini "$P" gpuhost libssh2 proj
stop_all() {
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all
cat >>"$P/gpurun.ini" <<'INI'
[build]
command =
[train]
command = sh run.sh
env = MODE=from-ini
INI
cd "$P" || exit 1
printf '%s\n' 'echo "code=one secret=$SECRET mode=$MODE lr=$lr"' 'for a in "$@"; do echo "arg=[$a]"; done' >run.sh
printf 'x\000\001y' >data.bin
printf 'kept\n' >same.txt
printf 'bye\n' >gone.txt
printf 'exec\n' >tool.sh
# What the cases write here is never synced.
printf '/%s\n' out err d s same latest heads want js st id w A B R >.gpurunignore

# id_of NAME: the newest job called NAME.
id_of() { "$GPURUN" status "$1" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["jobs"][0]["id"])'; }
wait_ended() {
	for _i in $(seq 1 300); do
		"$GPURUN" status "$1" --json >w 2>/dev/null && python3 -c '
import json, sys
j = json.load(open("w"))["jobs"]
sys.exit(0 if j and all(x["end"] for x in j) else 1)' && return 0
		sleep 0.1
	done
	return 1
}

test_expect_success 'two jobs: the first, then the tree edited, synced and run again' '
	cd "$P" &&
	"$GPURUN" -q train --name first --env SECRET=s3cr3t-value -- sh run.sh "a b" "" c >out 2>err &&
	test_grep "^code=one secret=s3cr3t-value mode=from-ini" out && test_grep -x "arg=\[a b\]" out &&
	A=$(id_of first) && echo "$A" >A &&
	sed -i "s/code=one/code=two/" run.sh && printf "x\000\002y" >data.bin && rm gone.txt &&
	printf "hello\n" >added.txt && chmod +x tool.sh && "$GPURUN" -q sync &&
	"$GPURUN" -q train --name second --env TOKEN=t0ken-value >out 2>err &&
	test_grep "^code=two" out && B=$(id_of second) && echo "$B" >B && test "$A" != "$B"
'

test_expect_success 'rerun runs the old snapshot with its words and environment; the local tree is not synced' '
	cd "$P" &&
	printf "local-only\n" >unsynced.txt &&
	"$GPURUN" rerun first >out 2>err && cat err &&
	test_grep "^code=one secret=s3cr3t-value mode=from-ini" out &&
	test_grep -x "arg=\[a b\]" out && test_grep -x "arg=\[\]" out && test_grep -x "arg=\[c\]" out &&
	test_grep "rerunning job $(cat A) (first)" err &&
	test -e "$TRASH/gpuhost-home/proj/run.sh" && ! test -e "$TRASH/gpuhost-home/proj/unsynced.txt" &&
	R=$(id_of first) && echo "$R" >R && test "$R" != "$(cat A)" &&
	"$GPURUN" status --json "$R" >js &&
	python3 -c "
import json
j = json.load(open(\"js\"))[\"jobs\"][0]
assert j[\"rerun_of\"] == open(\"A\").read().strip(), j
assert j[\"name\"] == \"first\" and j[\"state\"] == \"done\", j
assert j[\"command\"] == \"sh run.sh \x27a b\x27 \x27\x27 c\", j[\"command\"]
" &&
	"$GPURUN" status "$R" >st && test_grep "rerun_of" st
'

test_expect_success 'rerun --name and --detach; logs -f follows it' '
	cd "$P" &&
	"$GPURUN" rerun --name again --detach "$(cat A)" >id 2>err &&
	id=$(cat id) && test_grep "follow it with .gpurun logs -f again" err &&
	"$GPURUN" logs -f "$id" >out && test_grep "^code=one" out &&
	test "$(id_of again)" = "$id"
'

test_expect_success 'diff: the edited, added and removed files, a binary file, a mode change' '
	cd "$P" &&
	"$GPURUN" diff "$(cat A)" "$(cat B)" >d 2>err && cat d &&
	grep "^diff --git " d >heads &&
	printf "%s\n" "diff --git a/added.txt b/added.txt" "diff --git a/data.bin b/data.bin" \
		"diff --git a/gone.txt b/gone.txt" "diff --git a/run.sh b/run.sh" \
		"diff --git a/tool.sh b/tool.sh" >want && test_cmp want heads &&
	test_grep -x "new file mode 100644" d && test_grep -x "deleted file mode 100644" d &&
	test_grep -x "+hello" d && test_grep -x -- "-bye" d &&
	test_grep "^-echo \"code=one" d && test_grep "^+echo \"code=two" d &&
	test_grep -x "Binary files a/data.bin and b/data.bin differ" d &&
	test_grep -x "old mode 100644" d && test_grep -x "new mode 100755" d &&
	! grep -q same.txt d && ! grep -q unsynced d
'

test_expect_success 'diff: the config with env names, never their values' '
	cd "$P" &&
	"$GPURUN" diff "$(cat A)" "$(cat B)" >d 2>/dev/null &&
	test_grep -x -- "-env SECRET" d && test_grep -x "+env TOKEN" d &&
	test_grep -x -- "-command = sh run.sh .a b. .. c" d && test_grep -x "+command = sh run.sh" d &&
	! grep -q "env MODE" d && ! grep -q "s3cr3t-value" d && ! grep -q "t0ken-value" d &&
	! grep -q "name = " d
'

test_expect_success 'diff --stat; a job and its rerun do not differ; one JOB is compared with the latest' '
	cd "$P" &&
	"$GPURUN" diff --stat "$(cat A)" "$(cat B)" >s 2>/dev/null && cat s &&
	test_grep "run.sh *| *2 +-" s && test_grep "5 files changed" s &&
	"$GPURUN" diff "$(cat A)" "$(cat R)" >same 2>err && test ! -s same &&
	test_grep "same code and config" err &&
	"$GPURUN" diff "$(cat B)" >latest 2>err && test_grep "to job $(id_of again) (again)" err &&
	test_grep "^+echo \"code=one" latest
'

test_expect_success 'rerun does not wait for the --after job again (and says so)' '
	cd "$P" &&
	"$GPURUN" -q train --name waiter --after second:ok -- true >/dev/null 2>&1 &&
	"$GPURUN" rerun waiter >out 2>err && cat err &&
	test_grep "waited for job $(cat B) (--after); the rerun does not wait" err &&
	"$GPURUN" status --json "$(id_of waiter)" >js &&
	python3 -c "
import json
j = json.load(open(\"js\"))[\"jobs\"][0]
assert not j.get(\"after\") and j[\"rerun_of\"], j"
'

test_expect_success 'a sweep job reruns with its variables' '
	cd "$P" &&
	"$GPURUN" train --name sw --sweep lr=0.1,0.2 -- sh run.sh "{lr}" >out 2>err &&
	wait_ended sw && "$GPURUN" rerun sw-2 >out 2>err && cat out &&
	test_grep "lr=0.2\$" out && test_grep -x "arg=\[0.2\]" out &&
	"$GPURUN" status --json sw-2 >js &&
	python3 -c "
import json
j = json.load(open(\"js\"))[\"jobs\"][0]
assert j[\"group\"] == \"sw\" and j[\"rerun_of\"], j"
'

test_expect_success 'a file the job changed in its snapshot: the rerun says so' '
	cd "$P" &&
	"$GPURUN" -q train --name writer -- sh -c "cat same.txt; echo more >>same.txt" >out 2>&1 &&
	"$GPURUN" rerun writer >out 2>err && cat err &&
	test_grep "warning: 1 file of the job.s snapshot changed in its folder after it started" err &&
	test_grep "same.txt" err && test_grep -x more out
'

test_expect_success 'a job without a record of its snapshot (an older gpurun) is refused' '
	cd "$P" && B=$(cat B) &&
	rm "$TRASH"/gpuhost-home/.cache/gpurun/jobs/*/"$B"/.gpurun/snapshot &&
	test_expect_code 1 "$GPURUN" rerun "$B" 2>err && cat err &&
	test_grep "job $B has no record of its snapshot" err &&
	test_expect_code 1 "$GPURUN" diff "$B" "$(cat R)" 2>err && test_grep "no record of its snapshot" err
'

test_expect_success 'a removed job cannot be rerun; a group or two jobs are refused' '
	cd "$P" &&
	A=$(cat A) && "$GPURUN" -q rm "$A" &&
	test_expect_code 1 "$GPURUN" rerun "$A" 2>err && cat err &&
	test_grep "no job .$A. on the host" err && test_grep "took its snapshot with it" err &&
	! "$GPURUN" rerun sw 2>err && test_grep "sweep of 3 jobs" err &&
	test_expect_code 252 "$GPURUN" rerun first second 2>err
'

test_done
