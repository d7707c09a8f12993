#!/bin/bash
# Jobs that fit real training scripts, over a real sshd (libssh2): a
# Python project made here (python3 from Debian, no frameworks) with a
# train.py that resumes from checkpoints/, writes metrics.jsonl, and reads
# a gitignored data/ sent by [sync] include; the config is the one
# 'gpurun init' writes for it. Checks: the first train works as written;
# outputs named as the job sees them come back; a second run resumes from
# the first's checkpoint; setup runs once, and again when
# requirements.txt changes; data/ arrives and is never deleted; the host's
# disk after 10 runs holds what they wrote and not one copy more of the
# environment or the data; prune/rm/[jobs] keep; the login shell.
. "$(dirname "$0")/../lib.sh"

start_sshd gpuhost || { test_skip 'the workspace over ssh' 'sshd could not start here'; test_done; }
trust_sshd gpuhost
HH=$TRASH/gpuhost-home   # the host's home
P=$TRASH/proj R=$HH/proj
jobs_root() { echo "$HH/.cache/gpurun/jobs"; }
# Jobs a failing case left waiting end at exit.
test_atexit 'touch "$TRASH/go" "$TRASH/go2" "$TRASH/go3"'

# A small trainer: resumes from the newest checkpoint, writes STEPS more
# steps, a checkpoint of CKPT bytes, metrics.jsonl and out/model.bin
# (OUT bytes) in its working folder.
mkproject() {
	mkdir -p "$1/data" && (cd "$1" && git init -q .) &&
	cat >"$1/train.py" <<'PY'
import json, os, sys
steps, ckpt_bytes, out_bytes = (int(os.environ.get(k, d)) for k, d in
                                (("STEPS", "5"), ("CKPT", "1000"), ("OUT", "1000")))
os.makedirs("checkpoints", exist_ok=True)
done = sorted(int(f[5:-5]) for f in os.listdir("checkpoints") if f.startswith("step-"))
start = done[-1] if done else 0
if start:
    print("resumed from step", start, flush=True)
data = os.path.getsize("data/train.bin") if os.path.exists("data/train.bin") else -1
print("data bytes", data, flush=True)
with open("metrics.jsonl", "a") as m:
    for s in range(start + 1, start + steps + 1):
        print("step", s, flush=True)
        m.write(json.dumps({"step": s, "loss": 1.0 / s}) + "\n")
with open("checkpoints/step-%d.json" % (start + steps), "w") as c:
    c.write(json.dumps({"step": start + steps}) + " " * max(0, ckpt_bytes - 20))
os.makedirs("out", exist_ok=True)
with open("out/model.bin", "wb") as o:
    o.write(os.urandom(out_bytes))
PY
	printf '# no dependencies: this test has no network\n' >"$1/requirements.txt" &&
	printf 'data/\n' >"$1/.gitignore" &&
	head -c 2000000 /dev/urandom >"$1/data/train.bin"
}
# host_config DIR REMOTE_PATH: point the init-written gpurun.ini at the host.
host_config() {
	sed -i -e 's|^#host = .*|host = gpuhost|' -e "s|^path = .*|path = $2|" "$1/gpurun.ini"
}
last_id() { head -n1 .gpurun/jobs | cut -f1; }
# The bytes a folder tree holds on disk, each file once, as du counts.
disk() { du -s -B1 "$1" | cut -f1; }

mkproject "$P"
T=$TRASH/out && mkdir -p "$T"   # what the cases write, outside the projects

test_expect_success 'init in a Python project writes a config that fits it' '
	cd "$P" && "$GPURUN" init 2>$T/err && test_grep "Python" gpurun.ini &&
	test_grep -x "command = .venv/bin/python train.py" gpurun.ini &&
	test_grep -x "persist = checkpoints/ .venv/" gpurun.ini &&
	test_grep -x "inputs = requirements.txt" gpurun.ini &&
	test_grep -x "command =" gpurun.ini && ! grep -q "kernels" gpurun.ini &&
	host_config "$P" proj && printf "[sync]\ninclude = data/\n" >>gpurun.ini &&
	"$GPURUN" config sync.include >$T/inc && test_grep -x "data/" $T/inc
'

test_expect_success 'its first train succeeds: setup makes the .venv, the job runs' '
	cd "$P" && "$GPURUN" train >$T/out 2>$T/err &&
	test_grep "\[gpurun\] setup: python3 -m venv .venv" $T/out && test_grep -x "step 5" $T/out &&
	test -x "$R/.venv/bin/python" && test_grep "exited with status 0" $T/err
'

test_expect_success 'checkpoints and metrics written in the working folder are pulled' '
	cd "$P" && id=$(last_id) &&
	test -f "runs/$id/checkpoints/step-5.json" && test -f "runs/$id/metrics.jsonl" &&
	test $(wc -l <"runs/$id/metrics.jsonl") = 5 && test_grep "pulled 2 artifacts" $T/err
'

test_expect_success 'the gitignored data/ arrives through [sync] include; the job reads it' '
	cd "$P" && cmp data/train.bin "$R/data/train.bin" && test_grep -x "data bytes 2000000" $T/out &&
	"$GPURUN" sync --why data/train.bin >$T/why &&
	test_grep "included by \[sync\] include:1 .data/." $T/why && test_grep "without it, folder .data/. is ignored by .gitignore:1" $T/why
'

test_expect_success 'a second run resumes from the first run'"'"'s checkpoint' '
	cd "$P" && "$GPURUN" train >$T/out2 2>$T/err2 && id2=$(last_id) &&
	test_grep -x "resumed from step 5" $T/out2 && test_grep -x "step 10" $T/out2 &&
	test -f "runs/$id2/checkpoints/step-10.json" &&
	! test -e "runs/$id2/checkpoints/step-5.json" &&
	test -f "$R/checkpoints/step-5.json" && test -f "$R/checkpoints/step-10.json"
'

test_expect_success 'setup ran once across three trains; it runs again after requirements.txt changes' '
	cd "$P" && "$GPURUN" -q train >$T/out3 &&
	test_grep "setup: up to date" $T/out2 && test_grep "setup: up to date" $T/out3 &&
	! grep -q "setup: python3" $T/out2 $T/out3 &&
	echo "# still none" >>requirements.txt && "$GPURUN" -q train >$T/out4 &&
	test_grep "\[gpurun\] setup: python3 -m venv" $T/out4 &&
	"$GPURUN" -q train >$T/out5 && test_grep "setup: up to date" $T/out5 &&
	"$GPURUN" -q train --setup >$T/out6 && test_grep "\[gpurun\] setup: python3 -m venv" $T/out6
'

test_expect_success 'a sync never deletes the host'"'"'s data/, ignored here, once include is gone' '
	cd "$P" && sed -i "/^include = data/d" gpurun.ini &&
	"$GPURUN" sync -n >$T/plan && ! grep -q "data" plan &&
	"$GPURUN" -q sync && cmp data/train.bin "$R/data/train.bin" &&
	"$GPURUN" sync --why data/train.bin >$T/why && test_grep "stays on the host" $T/why &&
	"$GPURUN" sync 2>$T/s && test_grep "up to date" $T/s &&
	printf "[sync]\ninclude = data/\n" >>gpurun.ini
'

test_expect_success 'outputs named as the job sees them; $GPURUN_JOB_DIR/ works too; no match says what was written' '
	cd "$P" && "$GPURUN" -q -o "artifacts.pull=\$GPURUN_JOB_DIR/out/" train >/dev/null &&
	id=$(last_id) && test -f "runs/$id/out/model.bin" &&
	"$GPURUN" -o "artifacts.pull=nothing/*.npz" pull "$id" 2>$T/err &&
	test_grep "no file of job $id matches \[artifacts\] pull (nothing/\*.npz)" $T/err &&
	test_grep "metrics.jsonl" $T/err && test_grep "out/model.bin" $T/err && test_grep "checkpoints/step-" $T/err &&
	test_grep "^hint: .*relative to its working folder" $T/err &&
	"$GPURUN" -o "artifacts.pull=nothing/*.npz" train >/dev/null 2>$T/err &&
	test_grep "no file of job .* matches" $T/err && test_grep "out/model.bin" $T/err
'

test_expect_success 'a second train while one runs says so; setup waits for the first'"'"'s' '
	cd "$P" && echo "# changed again" >>requirements.txt && rm -f "$TRASH/go" &&
	a=$("$GPURUN" -q -o "train.command=while ! test -e $TRASH/go; do sleep 0.1; done" train --detach) &&
	b=$("$GPURUN" -o "train.command=echo second" train --detach 2>$T/err) &&
	test_grep "job $a of this project is .* this one builds and runs in its own folder" $T/err &&
	touch "$TRASH/go" && "$GPURUN" logs -f "$a" >$T/la && "$GPURUN" logs -f "$b" >$T/lb &&
	test $(cat $T/la $T/lb | grep -c "\[gpurun\] setup: python3") = 1 &&
	{ test_grep "waiting for job $a.s setup" $T/lb || test_grep "waiting for job $b.s setup" $T/la; }
'

test_expect_success 'rm refuses a running job and removes ended ones' '
	cd "$P" && rm -f "$TRASH/go2" &&
	a=$("$GPURUN" -q -o "train.command=while ! test -e $TRASH/go2; do sleep 0.1; done" train --detach) &&
	old=$("$GPURUN" status --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"jobs\"][-1][\"id\"])") &&
	test_expect_code 1 "$GPURUN" rm "$a" "$old" 2>$T/err &&
	test_grep "cannot remove.*$a.*stop it first" $T/err && test_grep "removed job $old" $T/err &&
	test -d "$(jobs_root)"/*/"$a" && ! test -e "$(jobs_root)"/*/"$old" &&
	touch "$TRASH/go2" && "$GPURUN" -q logs -f "$a" >/dev/null && "$GPURUN" -q rm "$a" &&
	! test -e "$(jobs_root)"/*/"$a"
'

# A project of its own for the disk measurement: its jobs root holds
# nothing else.
P2=$TRASH/proj2 R2=$HH/proj2
mkproject "$P2"
OUT=300000 CKPT=100000

test_expect_success 'host disk use after 10 runs stays within what the runs wrote' '
	cd "$P2" && "$GPURUN" -q init && host_config "$P2" proj2 &&
	printf "[sync]\ninclude = data/\n" >>gpurun.ini && sed -i "s/^keep = .*/keep = 0/" gpurun.ini &&
	for i in 1 2 3 4 5 6 7 8 9 10; do
		OUT=$OUT CKPT=$CKPT "$GPURUN" -q -o "train.command=OUT=$OUT CKPT=$CKPT .venv/bin/python train.py" train >/dev/null || exit 1
	done &&
	root=$(ls -d "$(jobs_root)"/proj2-*) && test $(ls "$root" | grep -c "^2") = 10 &&
	venv=$(disk "$R2/.venv") && store=$(disk "$root/.objects") && total=$(disk "$root") &&
	logs=$(cat "$root"/2*/.gpurun/log | wc -c) &&
	# What the runs wrote in their folders: out/model.bin, metrics.jsonl
	# (5 lines) and the log, each rounded up to 4 KiB blocks; gpurun
	# keeps about 15 small files (the record of its snapshot, for rerun and
	# diff, among them) and 3 folders per job (72 KiB at most).
	written=$(( 10 * (OUT + 4095) / 4096 * 4096 + 10 * 4096 + logs + 10 * 4096 )) &&
	bound=$(( written + 10 * 73728 + store )) &&
	say "disk after 10 runs: jobs root $total B (store $store B, shared: code and data once);" \
	    "written by the runs $written B; bound $bound B; the .venv is $venv B and data 2000000 B" &&
	test "$total" -le "$bound" &&
	# Not one copy of the environment per job, nor of the data:
	test "$store" -lt $(( 2000000 + 200000 )) && test "$store" -ge 2000000 &&
	test "$venv" -gt 1000000 && test "$total" -lt $(( 10 * OUT + venv )) &&
	"$GPURUN" status --all --json >$T/js &&
	python3 -c "import json,sys; d=json.load(open(\"$T/js\")); t=d[\"disk_total_bytes\"]; \
assert abs(t - $total) <= 65536, (t, $total); assert all(j[\"disk_bytes\"] < $OUT + 200000 for j in d[\"jobs\"]), d" &&
	"$GPURUN" status --all >$T/st && test_grep "disk used on the host by this project.s jobs" $T/st
'

test_expect_success 'prune --keep 2 leaves exactly the two newest' '
	cd "$P2" && "$GPURUN" status --all --json >$T/before &&
	newest=$(python3 -c "import json; print(\" \".join(j[\"id\"] for j in json.load(open(\"$T/before\"))[\"jobs\"][:2]))") &&
	"$GPURUN" prune --keep 2 2>$T/err && test_grep "removed 8 jobs" $T/err &&
	"$GPURUN" status --all --json >$T/after &&
	test "$(python3 -c "import json; print(\" \".join(j[\"id\"] for j in json.load(open(\"$T/after\"))[\"jobs\"]))")" = "$newest" &&
	root=$(ls -d "$(jobs_root)"/proj2-*) && test $(ls "$root" | grep -c "^2") = 2
'

test_expect_success '[jobs] keep applies after each train and never removes a running job' '
	cd "$P2" && sed -i "s/^keep = .*/keep = 2/" gpurun.ini && rm -f "$TRASH/go3" &&
	a=$("$GPURUN" -o "train.command=while ! test -e $TRASH/go3; do sleep 0.1; done" train --detach 2>$T/err) &&
	test_grep "removed 1 old job from the host (.*; \[jobs\] keep = 2)" $T/err &&
	"$GPURUN" -q train >/dev/null && "$GPURUN" -q train >/dev/null && "$GPURUN" status --all >$T/st &&
	test_grep "^$a  running" $T/st && test $(grep -c "^2" $T/st) = 3 &&
	touch "$TRASH/go3" && "$GPURUN" -q logs -f "$a" >/dev/null &&
	"$GPURUN" -q train >/dev/null && "$GPURUN" status --all >$T/st && test $(grep -c "^2" $T/st) = 2 &&
	! grep -q "^$a" $T/st
'

test_expect_success '[train] shell = login: setup, build and job see ~/.bashrc; doctor says which python' '
	cd "$P2" && mkdir -p "$HH/bin" &&
	printf "#!/bin/sh\necho fake python\n" >"$HH/bin/python3" && chmod +x "$HH/bin/python3" &&
	# As Debian'"'"'s: the rest only for interactive shells (where conda init
	# and venv activations go), so sshd'"'"'s bash -c skips it.
	printf "case \$- in *i*) ;; *) return;; esac\nexport FROM_RC=yes\nexport PATH=$HH/bin:\$PATH\n" >"$HH/.bashrc" &&
	printf "if [ -n \"\$BASH_VERSION\" ] && [ -f \"\$HOME/.bashrc\" ]; then . \"\$HOME/.bashrc\"; fi\n" >"$HH/.profile" &&
	"$GPURUN" -o train.command="echo rc=\$FROM_RC" -o "build.command=echo build-rc=\$FROM_RC" train >$T/o1 2>/dev/null &&
	test_grep -x "rc=" $T/o1 && test_grep -x "build-rc=" $T/o1 &&
	"$GPURUN" -o train.shell=login -o train.command="echo rc=\$FROM_RC" -o "build.command=echo build-rc=\$FROM_RC" train >$T/o2 2>/dev/null &&
	test_grep -x "rc=yes" $T/o2 && test_grep -x "build-rc=yes" $T/o2 &&
	{ "$GPURUN" -o train.shell=login doctor >$T/d2 || :; } && test_grep "job python .*$HH/bin/python3" $T/d2 &&
	{ "$GPURUN" doctor >$T/d1 || :; } && ! grep -q "job python .*$HH/bin" $T/d1 && test_grep "job shell" $T/d1
'

test_done
