#!/bin/bash
# A real Python project runs right the first time, over a real sshd: a
# third-party-shaped project (pyproject.toml, a src/ package installed
# editable by setup, data prepared by setup, a checkpoint the next run
# resumes from), configured by 'gpurun init'. Checks: the first train
# sees what setup made (the .venv, data/); the job imports its own
# snapshot's code through the editable install, in the main process and
# in a child started with spawn, while a sync changes the project under
# it; the next train resumes; the environment costs the host one copy
# however many jobs ran; jobs see a real TERM. Needs PyPI for pip's
# build backend (setuptools), as a user's setup does.
. "$(dirname "$0")/../lib.sh"

start_sshd gpuhost || { test_skip 'a Python project over ssh' 'sshd could not start here'; test_done; }
trust_sshd gpuhost
if ! timeout 60 python3 -m pip download -q --no-deps -d "$TRASH/probe" setuptools >/dev/null 2>&1; then
	test_skip 'a Python project with an editable install' 'PyPI cannot be reached (setup installs setuptools from it)'
	test_done
fi
HH=$TRASH/gpuhost-home
P=$TRASH/proj R=$HH/proj
T=$TRASH/out && mkdir -p "$T"
test_atexit 'touch "$TRASH/go"'
jobs_root() { echo "$HH/.cache/gpurun/jobs"; }
last_id() { head -n1 .gpurun/jobs | cut -f1; }

mkdir -p "$P/src/mypkg" && (cd "$P" && git init -q .)
cat >"$P/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "mypkg"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]
EOF
echo 'VERSION = "v1"' >"$P/src/mypkg/__init__.py"
cat >"$P/train.py" <<'PY'
import json, multiprocessing, os, sys, time
import mypkg

def child(q):
    import mypkg
    q.put(mypkg.VERSION)

if __name__ == "__main__":
    go = os.environ.get("WAIT_FOR")
    while go and not os.path.exists(go):
        time.sleep(0.1)
    if go:
        import importlib
        importlib.reload(mypkg)
    here = os.environ["GPURUN_JOB_DIR"]
    print("version", mypkg.VERSION, flush=True)
    print("imported from", os.path.relpath(mypkg.__file__, here), flush=True)
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    print("child version", q.get(timeout=60), flush=True)
    p.join()
    print("data", open("data/prepared.txt").read().strip(), flush=True)
    print("TERM", os.environ.get("TERM"), flush=True)
    os.makedirs("checkpoints", exist_ok=True)
    step = 0
    if os.path.exists("checkpoints/ckpt.json"):
        step = json.load(open("checkpoints/ckpt.json"))["step"]
        print("resumed from step", step, flush=True)
    step += 3
    json.dump({"step": step}, open("checkpoints/ckpt.json", "w"))
    print("step", step, flush=True)
PY
printf '.venv/\ndata/\n*.egg-info/\n' >"$P/.gitignore"

test_expect_success 'init recognises the pyproject package: pip -e in a .venv, kept by persist' '
	cd "$P" && "$GPURUN" init 2>$T/err &&
	test_grep -x "command = python3 -m venv .venv && .venv/bin/pip install -e ." gpurun.ini &&
	test_grep -x "inputs = pyproject.toml" gpurun.ini &&
	test_grep -x "persist = checkpoints/ .venv/" gpurun.ini &&
	test_grep -x "command = .venv/bin/python train.py" gpurun.ini &&
	sed -i -e "s|^#host = .*|host = gpuhost|" -e "s|^path = .*|path = proj|" \
		-e "s|^command = python3 -m venv .venv && .venv/bin/pip install -e .$|& -q \&\& mkdir -p data \&\& echo prepared-by-setup >data/prepared.txt|" \
		gpurun.ini && test_grep "prepared-by-setup" gpurun.ini
'

test_expect_success 'the first train sees what setup made: the .venv, the data, the editable package' '
	cd "$P" && "$GPURUN" train >$T/out 2>$T/err &&
	test_grep "exited with status 0" $T/err &&
	test_grep -x "version v1" $T/out && test_grep -x "child version v1" $T/out &&
	test_grep -x "data prepared-by-setup" $T/out &&
	test_grep -x "imported from src/mypkg/__init__.py" $T/out &&
	test_grep "\[gpurun\] editable install of src (.venv, __editable__.mypkg-0.1.pth): imported from this job.s snapshot" $T/out &&
	test_grep -x "step 3" $T/out && test -x "$R/.venv/bin/python" &&
	id=$(last_id) && test -f "runs/$id/checkpoints/ckpt.json"
'

test_expect_success 'jobs see a real terminal type: xterm-256color without a terminal here' '
	test_grep -x "TERM xterm-256color" $T/out
'

test_expect_success 'a running job imports its snapshot'"'"'s code while a sync changes the project' '
	cd "$P" && rm -f "$TRASH/go" &&
	"$GPURUN" -q train --detach --env WAIT_FOR="$TRASH/go" >$T/id 2>$T/err && id=$(cat $T/id) &&
	for i in $(seq 1 600); do test -s "$(jobs_root)"/*/"$id"/.gpurun/run && break; sleep 0.1; done &&
	echo "VERSION = \"v2\"" >src/mypkg/__init__.py && "$GPURUN" -q sync &&
	test_grep "v2" "$R/src/mypkg/__init__.py" &&
	touch "$TRASH/go" && "$GPURUN" logs -f "$id" >$T/log 2>&1 &&
	test_grep -x "version v1" $T/log && test_grep -x "child version v1" $T/log &&
	test_grep -x "resumed from step 3" $T/log
'

test_expect_success 'the next job runs the new code, and resumes from the last checkpoint' '
	cd "$P" && "$GPURUN" train >$T/out3 2>$T/err3 &&
	test_grep -x "version v2" $T/out3 && test_grep -x "child version v2" $T/out3 &&
	test_grep -x "resumed from step 6" $T/out3 && test_grep -x "step 9" $T/out3 &&
	test_grep "setup: up to date" $T/out3
'

test_expect_success 'the environment costs the host one copy: five jobs hold none of it' '
	cd "$P" && "$GPURUN" -q train >/dev/null && "$GPURUN" -q train >/dev/null &&
	test $(ls "$(jobs_root)"/*/ | grep -c "^20") -ge 5 &&
	venv=$(du -s -B1 "$R/.venv" | cut -f1) && jobs=$(du -s -B1 "$(jobs_root)" | cut -f1) &&
	say "the .venv: $venv B; five jobs and their store: $jobs B" &&
	test "$venv" -gt 1000000 && test "$jobs" -lt $((venv / 4)) &&
	for d in "$(jobs_root)"/*/20*; do test -L "$d/.venv" || return 1; done
'

# A flat layout: setuptools installs it editable through a finder module
# that maps the package to the project folder (not a path on sys.path).
# The script lives in tools/, so nothing but that finder finds flatpkg.
F=$TRASH/flat && mkdir -p "$F/flatpkg" "$F/tools" && (cd "$F" && git init -q .)
cat >"$F/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "flatpkg"
version = "0.1"

[tool.setuptools]
packages = ["flatpkg"]
EOF
echo "V = 1" >"$F/flatpkg/__init__.py" && printf '.venv/\n*.egg-info/\n' >"$F/.gitignore"
cat >"$F/tools/t.py" <<'PY'
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
import flatpkg
print("V", flatpkg.V, os.path.relpath(flatpkg.__file__, os.environ["GPURUN_JOB_DIR"]), flush=True)
PY
test_expect_success 'a flat layout (setuptools'"'"' editable finder, not a path): the job imports its snapshot too' '
	cd "$F" && "$GPURUN" init 2>/dev/null &&
	sed -i -e "s|^#host = .*|host = gpuhost|" -e "s|^path = .*|path = flat|" gpurun.ini &&
	rm -f "$TRASH/go" &&
	"$GPURUN" -q train --detach -- .venv/bin/python tools/t.py "$TRASH/go" >$T/fid &&
	for i in $(seq 1 1200); do test -s "$(jobs_root)"/flat-*/"$(cat $T/fid)"/.gpurun/run && break; sleep 0.1; done &&
	ls "$HH/flat/.venv/lib/"python3*/site-packages/ >$T/site && test_grep "__editable___flatpkg.*finder.py" $T/site &&
	echo "V = 2" >flatpkg/__init__.py && "$GPURUN" -q sync && touch "$TRASH/go" &&
	"$GPURUN" logs -f "$(cat $T/fid)" >$T/flat 2>&1 && test_grep -x "V 1 flatpkg/__init__.py" $T/flat
'

test_expect_success 'a project with train.py only: the setup line init suggests works on the first train' '
	Q=$TRASH/plain && mkdir -p "$Q" && cd "$Q" && git init -q . &&
	printf "import os\nprint(\"py\", os.path.exists(\".venv/bin/python\"))\n" >train.py &&
	printf ".venv/\n" >.gitignore && "$GPURUN" init 2>/dev/null &&
	test_grep -x "persist = checkpoints/ .venv/" gpurun.ini &&
	test_grep -x "#command = python3 -m venv .venv && .venv/bin/pip install -r requirements.txt" gpurun.ini &&
	sed -i -e "s|^#host = .*|host = gpuhost|" -e "s|^path = .*|path = plain|" \
		-e "s|^#command = python3 -m venv .venv.*|command = python3 -m venv .venv|" \
		-e "s|^command = python3 train.py|command = .venv/bin/python train.py|" gpurun.ini &&
	"$GPURUN" train >$T/p 2>$T/perr && test_grep -x "py True" $T/p
'

test_done
