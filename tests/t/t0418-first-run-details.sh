#!/bin/bash
# The details a new user meets on the first runs (issue 28), over the
# local transport: the terminal type a job sees on a terminal here;
# exec runs the host's copy unless --sync; .gpurun/ stays out of git;
# sync says what the ignore rules left out; the pull hint names the
# job's output, not a cache or an environment; a second job's note names
# the shared persist paths; "1 file"; one exit code and --yes for a sync
# refused above warn_size, from sync and from train; no empty runs/JOB/;
# a duration that counts setup; train -L says what it forwards.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/host
T=$TRASH/out && mkdir -p "$T" "$R"
test_atexit 'touch "$TRASH/go"'
mkdir -p "$P" && (cd "$P" && git init -q .)
write_ini "$P" local local "$R/proj"
printf '[train]\ncommand = sh -c "echo TERM=\\$TERM"\npersist = checkpoints/\n' >>"$P/gpurun.ini"
echo 'print("hello v1")' >"$P/hello.py"
printf 'data/\n*.bin\n' >"$P/.gitignore"
mkdir -p "$P/data" && head -c 3000 /dev/zero >"$P/data/a.dat" && head -c 5000 /dev/zero >"$P/big.bin"

test_expect_success 'a job sees the TERM of the terminal gpurun runs on' '
	cd "$P" && python3 "$TOP/tests/helpers/pty_run.py" $T/pty "$GPURUN" train &&
	tr -d "\r" <$T/pty >$T/pty.txt && test_grep -x "TERM=xterm" $T/pty.txt
'

test_expect_success 'init says what git'"'"'s rules will leave out of every sync' '
	mkdir -p "$TRASH/fresh/data" && cd "$TRASH/fresh" && git init -q . &&
	printf "data/\n*.pkl\n" >.gitignore && head -c 2048 /dev/zero >x.pkl && echo 1 >data/d &&
	"$GPURUN" init 2>$T/init &&
	test_grep "note: git.s rules leave out 1 file (2.0 KiB) and folders (data/) of every sync" $T/init
'

test_expect_success '.gpurun/ ignores itself: git status does not show it' '
	cd "$P" && test -d .gpurun && test_grep -x "\*" .gpurun/.gitignore &&
	git status --porcelain >$T/st && ! grep -q "gpurun/" $T/st
'

test_expect_success 'sync says what the ignore rules left out, and --dry-run counts inside folders' '
	cd "$P" && "$GPURUN" sync 2>$T/s &&
	test_grep "left out by the ignore rules: 1 file (4.9 KiB) and 1 folder (data/)" $T/s &&
	test_grep "hint: .gpurun sync --why PATH. names the rule" $T/s &&
	"$GPURUN" sync -n >/dev/null 2>$T/n &&
	test_grep "left out by the ignore rules: 2 files (7.8 KiB), counting those in 1 folder (data/)" $T/n &&
	"$GPURUN" -q train 2>$T/t >/dev/null && ! grep -q "left out" $T/t
'

test_expect_success 'one file is "1 file"' '
	cd "$P" && echo 2 >one.txt && "$GPURUN" sync 2>$T/one && test_grep "^synced 1 file (0 deleted)" $T/one &&
	echo 3 >one.txt && "$GPURUN" sync -n >/dev/null 2>$T/one-n && test_grep "^would send 1 file," $T/one-n
'

test_expect_success 'exec runs the host'"'"'s copy as last synced; --sync syncs first' '
	cd "$P" && "$GPURUN" -q sync && echo "print(\"hello v2\")" >hello.py &&
	"$GPURUN" exec -- python3 hello.py >$T/e1 && test_grep -x "hello v1" $T/e1 &&
	"$GPURUN" exec --sync -- python3 hello.py >$T/e2 2>$T/e2err && test_grep -x "hello v2" $T/e2 &&
	"$GPURUN" help exec >$T/h && test_grep "last sync left it" $T/h
'

test_expect_success 'a sync refused above warn_size exits 249 from sync and from train; --yes sends it' '
	cd "$P" && head -c 4000 /dev/urandom >blob.dat &&
	test_expect_code 249 "$GPURUN" -o sync.warn_size=1k sync </dev/null 2>$T/w1 &&
	test_grep "pass --yes" $T/w1 &&
	test_expect_code 249 "$GPURUN" -o sync.warn_size=1k train </dev/null 2>$T/w2 &&
	test_grep "not sending" $T/w2 && ! grep -q "sync failed" $T/w2 &&
	"$GPURUN" -q -o sync.warn_size=1k train --yes </dev/null >/dev/null
'

test_expect_success 'no empty runs/JOB/ for a job that pulled nothing; the hint names its output, not a cache' '
	cd "$P" && "$GPURUN" -o artifacts.pull=nothing.txt train -- sh -c \
		"mkdir -p __pycache__ .cache out && echo c >__pycache__/x.pyc && echo c >.cache/y && echo w >out/ckpt.pt" \
		>/dev/null 2>$T/p && id=$(head -n1 .gpurun/jobs | cut -f1) && ! test -e "runs/$id" &&
	test_grep "out/ckpt.pt" $T/p && ! grep -q "__pycache__\|\.cache/" $T/p &&
	test_grep "e.g. .pull = out/." $T/p
'

test_expect_success 'a second job'"'"'s note names the persist paths both write' '
	cd "$P" && rm -f "$TRASH/go" &&
	"$GPURUN" -q train --detach -- sh -c "while ! test -e $TRASH/go; do sleep 0.1; done" >$T/id1 &&
	"$GPURUN" train -- true >/dev/null 2>$T/second && touch "$TRASH/go" &&
	test_grep "is running too" $T/second &&
	test_grep "both see the same \[train\] persist paths (checkpoints/)" $T/second &&
	"$GPURUN" logs -f "$(cat $T/id1)" >/dev/null 2>&1
'

test_expect_success 'a duration counts the setup; status JOB shows the command'"'"'s own time' '
	cd "$P" && "$GPURUN" -q -o "setup.command=sleep 2" train -- true >/dev/null &&
	"$GPURUN" status --json >$T/js && python3 -c "import json,sys; j=json.load(open(sys.argv[1]))[\"jobs\"][0]; assert j[\"duration_s\"] >= 2, j" $T/js &&
	"$GPURUN" status "$(head -n1 .gpurun/jobs | cut -f1)" >$T/one && test_grep "^command ran " $T/one
'

test_expect_success 'an install the snapshot cannot cover is named before the command runs' '
	cd "$P" && mkdir -p src && echo x >src/m.py && "$GPURUN" -q sync &&
	"$GPURUN" -o "setup.command=mkdir -p venv/lib/python3.11/site-packages && touch venv/pyvenv.cfg && ln -sfn \"\$PWD/src\" venv/lib/python3.11/site-packages/mypkg" \
		train -- echo ran >$T/sym 2>&1 &&
	test_grep "warning: venv/mypkg links into the project folder" $T/sym &&
	test "$(grep -n "links into the project" $T/sym | cut -d: -f1)" -lt "$(grep -nx ran $T/sym | cut -d: -f1)"
'

test_expect_success 'train -L says what it forwards' '
	cd "$P" && port=$(free_port) && "$GPURUN" train -L "$port:127.0.0.1:9" -- true >/dev/null 2>$T/l &&
	test_grep "gpurun: forwarding .*$port" $T/l
'

test_done
