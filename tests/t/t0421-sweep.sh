#!/bin/bash
# train --sweep / --sweep-file and --after, over a real sshd (libssh2):
# a 2x2 sweep makes 4 jobs of one group, each with its variables in its
# environment and as {NAME} in its words; the group works for status,
# logs, pull, stop and rm; bad input is a usage error that starts
# nothing; --after resolves a name to the id the agent records.
. "$(dirname "$0")/../lib.sh"

start_sshd gpuhost || { test_skip 'sweeps over ssh' 'sshd could not start here'; test_done; }
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
command = echo from-the-config
env = lr=from-ini
[artifacts]
pull = out.json
INI
cat >"$P/dump.py" <<'PY'
import json, os, sys
d = {"argv": sys.argv[1:], "lr": os.environ.get("lr"), "bs": os.environ.get("bs"),
     "opt": os.environ.get("opt")}
print("DUMP " + json.dumps(d), flush=True)
open("out.json", "w").write(json.dumps(d))
PY
(cd "$P" && git init -q -b main . && git config user.email t@t && git config user.name t &&
	printf 'runs/\n/out\n/err\n/st\n/log\n/j\n/w\n/n*\n/sweep.txt\n' >.gitignore && git add -A &&
	git commit -q -m one)

# wait_ended GROUP: until every job of GROUP has ended.
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
njobs() { "$GPURUN" status --all --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["jobs"]))'; }

test_expect_success 'a 2x2 sweep: 4 jobs of one group, one line each, variables and {NAME} words' '
	cd "$P" && "$GPURUN" train --name g --sweep lr=1e-3,3e-4 --sweep bs=32,64 \
		-- python3 dump.py "{lr}/{bs}" "{x}" "{}" >out 2>err && cat out err &&
	test $(wc -l <out) = 4 &&
	test_grep "^g-1  [0-9a-f-]*  lr=1e-3 bs=32\$" out && test_grep "^g-2  [0-9a-f-]*  lr=1e-3 bs=64\$" out &&
	test_grep "^g-3  [0-9a-f-]*  lr=3e-4 bs=32\$" out && test_grep "^g-4  [0-9a-f-]*  lr=3e-4 bs=64\$" out &&
	test_grep "started 4 jobs of group g" err && test_grep "gpurun status g" err &&
	wait_ended g &&
	python3 -c "
import json
jobs = json.load(open(\"w\"))[\"jobs\"]
assert sorted(x[\"name\"] for x in jobs) == [\"g-1\", \"g-2\", \"g-3\", \"g-4\"], jobs
assert all(x[\"group\"] == \"g\" and x[\"state\"] == \"done\" for x in jobs), jobs
"
'

test_expect_success 'status GROUP lists exactly its jobs, with a GROUP column' '
	cd "$P" && "$GPURUN" train --name single -- true >/dev/null 2>&1 &&
	"$GPURUN" status g >st && cat st &&
	test_grep "^JOB  *STATE  *NAME  *GROUP  *STARTED" st &&
	test $(grep -c "  g-[1-4]  *g  " st) = 4 && ! grep -q single st &&
	"$GPURUN" status >st && test_grep " single  *-  " st
'

test_expect_success 'logs GROUP: each job after a header, oldest first; -f is refused, naming the jobs' '
	cd "$P" && "$GPURUN" logs g >log && cat log &&
	test $(grep -c "^==> .* <==\$" log) = 4 &&
	grep "^==>" log | sed -n 1p | grep -q "(g-1)" && grep "^==>" log | sed -n 4p | grep -q "(g-4)" &&
	test_grep "DUMP .*\"argv\": \[\"3e-4/64\", \"{x}\", \"{}\"\]" log &&
	test_expect_code 252 "$GPURUN" logs -f g 2>err && cat err &&
	test_grep "follows one job; group g has 4" err && test_grep "(g-3)" err
'

test_expect_success 'pull GROUP: each job into its own runs/<id>/, with its variables' '
	cd "$P" && rm -rf runs && "$GPURUN" pull g 2>err && cat err &&
	"$GPURUN" status g --json >j &&
	python3 -c "
import json
for x in json.load(open(\"j\"))[\"jobs\"]:
    got = json.load(open(\"runs/%s/out.json\" % x[\"id\"]))
    lr, bs = {\"g-1\": (\"1e-3\", \"32\"), \"g-2\": (\"1e-3\", \"64\"),
              \"g-3\": (\"3e-4\", \"32\"), \"g-4\": (\"3e-4\", \"64\")}[x[\"name\"]]
    assert got[\"lr\"] == lr and got[\"bs\"] == bs, (x, got)
    assert got[\"argv\"] == [lr + \"/\" + bs, \"{x}\", \"{}\"], got
"
'

test_expect_success '--sweep-file: one job a line, quoted as in [train] env, times --sweep' '
	cd "$P" && printf "# lr and its optimizer go together\n\nlr=0.1 opt=\"sgd m\"\n  lr=0.01 opt=adam\n" >sweep.txt &&
	"$GPURUN" train --name f --sweep-file sweep.txt --sweep bs=8,16 -- python3 dump.py >out 2>err &&
	cat out && test $(wc -l <out) = 4 &&
	test_grep "^f-1  .*  lr=0.1 .opt=sgd m. bs=8\$" out &&
	wait_ended f && rm -rf runs && "$GPURUN" -q pull f && "$GPURUN" status f --json >j &&
	python3 -c "
import json
for x in json.load(open(\"j\"))[\"jobs\"]:
    got = json.load(open(\"runs/%s/out.json\" % x[\"id\"]))
    want = {\"f-1\": (\"0.1\", \"sgd m\", \"8\"), \"f-2\": (\"0.1\", \"sgd m\", \"16\"),
            \"f-3\": (\"0.01\", \"adam\", \"8\"), \"f-4\": (\"0.01\", \"adam\", \"16\")}[x[\"name\"]]
    assert (got[\"lr\"], got[\"opt\"], got[\"bs\"]) == want, (x, got)
"
'

test_expect_success 'a sweep without --name gets a group of its own; a group is never reused' '
	cd "$P" && "$GPURUN" train --sweep lr=1 -- true >out 2>err &&
	test_grep "^sweep-[0-9]\{8\}-[0-9]\{6\}-1  " out &&
	test_expect_code 1 "$GPURUN" train --name g --sweep lr=1 -- true 2>err && cat err &&
	test_grep "has a sweep .g. already" err &&
	test_expect_code 1 "$GPURUN" train --name single --sweep lr=1 -- true 2>err &&
	test_grep "a job is named .single." err
'

test_expect_success 'bad sweeps are usage errors (252) that start nothing' '
	cd "$P" && before=$(njobs) &&
	test_expect_code 252 "$GPURUN" train --sweep 1lr=1,2 -- true 2>err && test_grep "not a variable name" err &&
	test_expect_code 252 "$GPURUN" train --sweep lr=1,,2 -- true 2>err && test_grep "empty value" err &&
	test_expect_code 252 "$GPURUN" train --sweep lr= -- true 2>err && test_grep "empty value" err &&
	test_expect_code 252 "$GPURUN" train --sweep lr -- true 2>err && test_grep "is not NAME=V1,V2" err &&
	test_expect_code 252 "$GPURUN" train --sweep lr=1 --sweep lr=2 -- true 2>err && test_grep "swept twice" err &&
	test_expect_code 252 "$GPURUN" train --sweep "a=$(seq -s, 1 40)" --sweep "b=$(seq -s, 1 30)" -- true 2>err &&
	test_grep "at most 1000" err &&
	test_expect_code 252 "$GPURUN" train --sweep "lr=$(printf "a\033b")" -- true 2>err &&
	printf "lr=1 \"x\n" >sweep.txt && test_expect_code 252 "$GPURUN" train --sweep-file sweep.txt -- true 2>err &&
	test_grep "sweep.txt:1:" err &&
	test_expect_code 252 "$GPURUN" train --sweep-file nosuch.txt -- true 2>err &&
	test_expect_code 252 "$GPURUN" train --sweep lr=1 -L 9:9 -- true 2>err &&
	test "$(njobs)" = "$before"
'

test_expect_success '--after: an unknown job is refused before anything starts; a name becomes its id' '
	cd "$P" && before=$(njobs) &&
	test_expect_code 1 "$GPURUN" train --after nosuch -- true 2>err && cat err &&
	test_grep "after: no job or group .nosuch." err &&
	test_expect_code 252 "$GPURUN" train --after single:maybe -- true 2>err &&
	test "$(njobs)" = "$before" &&
	"$GPURUN" train --name waits --after single:ok -- true >out 2>err &&
	"$GPURUN" status --json >j &&
	python3 -c "
import json
jobs = {x[\"name\"]: x for x in json.load(open(\"j\"))[\"jobs\"] if x[\"name\"]}
assert jobs[\"waits\"][\"after\"] == jobs[\"single\"][\"id\"] + \":ok\", jobs[\"waits\"]
" &&
	"$GPURUN" status waits >st && test_grep "^after  *[0-9a-f-]* (starts once it has ended, only if it succeeded)" st &&
	"$GPURUN" train --sweep seed=1,2 --name aft --after single -- true >out 2>err &&
	"$GPURUN" status aft --json >j &&
	python3 -c "
import json
jobs = json.load(open(\"j\"))[\"jobs\"]
assert len(jobs) == 2 and all(len(x[\"after\"]) == 20 for x in jobs), jobs
"
'

test_expect_success 'stop GROUP stops each job of it; rm GROUP removes them' '
	cd "$P" && "$GPURUN" train --name s --sweep n=1,2 -- sleep 600 >out 2>err &&
	"$GPURUN" -o train.stop_grace=1 stop s 2>err && cat err &&
	test_grep "group s: 2 jobs stopped" err &&
	"$GPURUN" status s >st && test $(grep -c " stopped " st) = 2 &&
	"$GPURUN" rm s 2>err && test $(grep -c "removed job" err) = 2 &&
	test_expect_code 1 "$GPURUN" status s 2>err && test_grep "no job or group .s." err &&
	"$GPURUN" rm g 2>err && test $(grep -c "removed job" err) = 4 && "$GPURUN" status single >/dev/null
'

test_done
