#!/bin/bash
# train [OPTIONS] [--] CMD [ARGS...], --env, --name and the commit a job
# ran from, over a real sshd (libssh2): the words reach the program
# byte-exact (spaces, quotes, $, \, an empty word, UTF-8, a newline), by
# sh and through the login shell; [train] env and --env (commas, spaces)
# set the job's environment; a name works wherever an id does (logs,
# status, stop, pull, rm), is unique among live jobs, reused once its job
# has ended, and refused on both sides when malformed; status and status
# --json show names, commands and the git commit, branch, dirtiness and
# diff hash git itself gives.
. "$(dirname "$0")/../lib.sh"

start_sshd gpuhost || { test_skip 'train arguments over ssh' 'sshd could not start here'; test_done; }
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
env = FROM_INI="a b,c" OVERRIDE=ini
[artifacts]
pull = out.json
INI
# The program prints its words and environment as JSON, and writes them.
cat >"$P/dump.py" <<'PY'
import json, os, sys
d = {"argv": sys.argv[1:], "FROM_INI": os.environ.get("FROM_INI"),
     "OVERRIDE": os.environ.get("OVERRIDE"), "EXTRA": os.environ.get("EXTRA")}
print("DUMP " + json.dumps(d), flush=True)
open("out.json", "w").write(json.dumps(d))
PY
(cd "$P" && git init -q -b main . && git config user.email t@t && git config user.name t &&
	printf 'runs/\n/out\n/err\n/st\n/log\n/j\n/c\n/id1\n' >.gitignore && git add -A &&
	git commit -q -m one)

# Words that a re-split (sh -c "$*", or joining and splitting on blanks)
# would mangle.
WORDS=("a b" "it's" '"q"' '$HOME' '' 'x\y' 'naïve' 'semi;colon' '*' "two
lines" '--lr' '3e-4')

test_expect_success 'train -- python3 dump.py WORDS: every word arrives byte-exact' '
	cd "$P" && "$GPURUN" train -- python3 dump.py "${WORDS[@]}" >out 2>err && cat out err &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	python3 -c "
import json, sys
got = json.load(open(\"runs/$id/out.json\"))
want = sys.argv[1:]
assert got[\"argv\"] == want, (got[\"argv\"], want)
" "${WORDS[@]}" &&
	! grep -q from-the-config out
'

test_expect_success '[train] env and --env: the job sees them, --env last' '
	cd "$P" && "$GPURUN" train --env OVERRIDE=cli --env "EXTRA=x, y" -- python3 dump.py >out 2>err &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	python3 -c "
import json
got = json.load(open(\"runs/$id/out.json\"))
assert got[\"FROM_INI\"] == \"a b,c\", got
assert got[\"OVERRIDE\"] == \"cli\", got
assert got[\"EXTRA\"] == \"x, y\", got
"
'

test_expect_success 'train options go before the command; after it, words are the command'"'"'s' '
	cd "$P" && "$GPURUN" train --name opts -- python3 dump.py --name not-ours -d >out 2>err &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	python3 -c "
import json
assert json.load(open(\"runs/$id/out.json\"))[\"argv\"] == [\"--name\", \"not-ours\", \"-d\"]
" &&
	"$GPURUN" train python3 dump.py --lr 1 >out 2>err && test_grep "\"argv\": \[\"--lr\", \"1\"\]" out
'

test_expect_success 'the login shell runs the words as they are too' '
	cd "$P" && printf "export FROM_PROFILE=1\n" >"$TRASH/gpuhost-home/.profile" &&
	"$GPURUN" -o train.shell=login train -- python3 dump.py "${WORDS[@]}" >out 2>err &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	python3 -c "
import json, sys
assert json.load(open(\"runs/$id/out.json\"))[\"argv\"] == sys.argv[1:]
" "${WORDS[@]}"
'

test_expect_success 'bad --env and --name are usage errors before anything runs' '
	cd "$P" && test_expect_code 252 "$GPURUN" train --env 1X=2 -- true 2>err &&
	test_grep "is not a variable name" err &&
	test_expect_code 252 "$GPURUN" train --env NOEQUALS -- true 2>err &&
	test_expect_code 252 "$GPURUN" train --name 2024-x -- true 2>err &&
	test_grep "bad job name .2024-x." err &&
	test_expect_code 252 "$GPURUN" train --name "a b" -- true 2>err &&
	test_expect_code 252 "$GPURUN" train --name "$(printf "x\033]0;t\a")" -- true 2>err
'

# agent_start KEY VALUE...: what the agent answers a JOB_START with that
# spec (for proj), sent straight to it as the client would: "TYPE MESSAGE".
agent_start() {
	python3 - "$@" >"$TRASH/req" <<'PY'
import struct, sys
def s(x):
    b = x.encode()
    return struct.pack(">I", len(b)) + b
kv = sys.argv[1:]
pl = s("proj") + struct.pack(">I", len(kv) // 2) + b"".join(s(x) for x in kv)
print((struct.pack(">IHHI", len(pl), 0x40, 0, 7) + pl).hex())
PY
	HOME=$TRASH/gpuhost-home "$BUILD/gpurun-agent" serve "$(cat "$TRASH/req")" </dev/null |
	python3 -c '
import struct, sys
d = sys.stdin.buffer.read(); d = d[d.index(b"\n") + 1:]
while len(d) >= 12:
    n, t, f, i = struct.unpack(">IHHI", d[:12])
    if i == 7:
        msg = d[12 + 8:12 + n] if t == 3 else b""
        print(t, msg.decode(errors="replace"))
    d = d[12 + n:]'
}

test_expect_success 'the agent refuses a malformed name or commit whatever the client sends' '
	agent_start command true name "bad name" >resp && cat resp && test_grep "^3 bad job name" resp &&
	agent_start command true name 9lives >resp && test_grep "^3 bad job name" resp &&
	agent_start command true git_commit nothex >resp && test_grep "^3 malformed git commit" resp &&
	agent_start command true argv "" >resp && test_grep "^3 the job.s argv names no program" resp
'

test_expect_success 'a name works wherever an id does: status, logs, pull' '
	cd "$P" && "$GPURUN" train --name lr-3e-4 -- python3 dump.py x >out 2>err &&
	test_grep "started job .* (lr-3e-4)" err &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	"$GPURUN" logs lr-3e-4 >log && test_grep "DUMP" log &&
	"$GPURUN" status lr-3e-4 >st && cat st && test_grep "^$id  done " st &&
	test_grep "^name  *lr-3e-4" st &&
	rm -rf "runs/$id" && "$GPURUN" pull lr-3e-4 2>err && test -f "runs/$id/out.json"
'

test_expect_success 'names are unique among live jobs; stop by name; then the name is free again' '
	cd "$P" && "$GPURUN" train --detach --name busy -- sleep 600 >id1 2>err &&
	test_expect_code 251 "$GPURUN" train --detach --name busy -- true 2>err &&
	cat err && test_grep "is called .busy. and has not ended" err && test_grep "gpurun stop busy" err &&
	"$GPURUN" -q -o train.stop_grace=1 stop busy &&
	"$GPURUN" status "$(cat id1)" >st && test_grep stopped st &&
	"$GPURUN" train --name busy -- echo second >out 2>err &&
	id2=$(head -n1 .gpurun/jobs | cut -f1) && test "$id2" != "$(cat id1)" &&
	"$GPURUN" logs busy >log && test_grep -x second log
'

test_expect_success 'rm takes a name; the cache and TAB offer names' '
	cd "$P" && test_grep "	busy\$" .gpurun/jobs &&
	"$GPURUN" __complete logs "" >c && test_grep "^busy	" c && test_grep "^lr-3e-4	" c &&
	"$GPURUN" __complete logs lr >c && test_grep "^lr-3e-4	" c &&
	"$GPURUN" rm lr-3e-4 2>err && ! "$GPURUN" status lr-3e-4 2>/dev/null
'

test_expect_success 'status --json: name, argv command, commit, branch, clean tree' '
	cd "$P" && "$GPURUN" train --name clean -- python3 dump.py "a b" >out 2>err &&
	"$GPURUN" status --json >j && head="$(git rev-parse HEAD)" &&
	python3 -c "
import json, shlex, sys
jobs = json.load(open(\"j\"))[\"jobs\"]
j = [x for x in jobs if x[\"name\"] == \"clean\"][0]
assert j[\"command_is_argv\"] is True, j
assert shlex.split(j[\"command\"]) == [\"python3\", \"dump.py\", \"a b\"], j
assert j[\"argv\"] == [\"python3\", \"dump.py\", \"a b\"], j
assert j[\"git_commit\"] == sys.argv[1], (j, sys.argv[1])
assert j[\"git_branch\"] == \"main\", j
assert j[\"git_dirty\"] is False and j[\"git_diff\"] is None, j
" "$head"
'

test_expect_success 'a dirty tree: git_dirty and a diff hash that follows the change' '
	cd "$P" && echo "# changed" >>dump.py &&
	"$GPURUN" train --name dirty1 -- python3 dump.py >out 2>err &&
	echo "# changed again" >>dump.py &&
	"$GPURUN" train --name dirty2 -- python3 dump.py >out 2>err &&
	git checkout -q dump.py &&
	"$GPURUN" status --json >j &&
	python3 -c "
import json
jobs = {x[\"name\"]: x for x in json.load(open(\"j\"))[\"jobs\"] if x[\"name\"]}
a, b = jobs[\"dirty1\"], jobs[\"dirty2\"]
for x in (a, b):
    assert x[\"git_dirty\"] is True and len(x[\"git_diff\"]) == 64, x
assert a[\"git_diff\"] != b[\"git_diff\"], (a, b)
assert a[\"git_commit\"] == b[\"git_commit\"]
" &&
	"$GPURUN" status dirty1 >st && test_grep "^changes  *the work tree differed" st
'

test_expect_success 'the status table: NAME, COMMIT (+ when dirty) and the command, shortened' '
	cd "$P" && "$GPURUN" status --all >st && cat st &&
	test_grep "^JOB  *STATE  *NAME  *STARTED .* COMMIT  *COMMAND\$" st &&
	short=$(git rev-parse HEAD | cut -c1-8) &&
	test_grep " dirty1 .* $short+  *python3 dump.py\$" st &&
	test_grep " clean .* $short  *python3 dump.py .a b.\$" st
'

test_expect_success '[train] command still runs when no words are given' '
	cd "$P" && "$GPURUN" train >out 2>err && test_grep -x from-the-config out
'

test_done
