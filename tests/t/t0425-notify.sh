#!/bin/bash
# [notify] command on the host and [notify] local on the laptop, over the
# local transport. On the host: the supervisor runs the command once the
# job's status is written, with the job's id, name, state, exit code,
# duration, folder and group in its environment (and only there: values
# never reach the shell's words), its output and how it ended in
# .gpurun/notify.log; a command that hangs is killed with its children
# at GPURUN_NOTIFY_TIMEOUT while the job's status and its GPUs are the
# next job's already. On the laptop: train and logs -f of a running job
# ring the terminal's bell (only a terminal's: never into a pipe) or run
# notify-send (a fake one here, first on PATH, recording its argv).
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R" "$TRASH/bin"
# ini [LINE...]: gpurun.ini for the local host, no build, lines as given.
ini() {
	write_ini "$P" local local "$R"
	printf '[build]\ncommand =\n' >>"$P/gpurun.ini"
	for kv in "$@"; do printf '%s\n' "$kv"; done >>"$P/gpurun.ini"
}
# wait_grep PATTERN FILE [SECONDS]
wait_grep() {
	for _i in $(seq 1 $((${3:-20} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
latest() { head -n1 "$P/.gpurun/jobs" | cut -f1; }
jobdir() { find "$HOME/.cache/gpurun/jobs" -mindepth 2 -maxdepth 2 -name "$1"; }
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all
# No real notify-send pops up on the machine running the tests.
unset DISPLAY WAYLAND_DISPLAY
S=$$ # unique sleep lengths, so pgrep sees only this run's
# The fake notify-send: its argv, one word a line, then "--".
cat >"$TRASH/bin/notify-send" <<SH
#!/bin/sh
for a in "\$@"; do printf '%s\n' "\$a"; done >>"$TRASH/desktop"
echo -- >>"$TRASH/desktop"
SH
chmod +x "$TRASH/bin/notify-send"
ENVCMD="command = env | grep ^GPURUN_JOB_ | sort >$TRASH/env"

test_expect_success 'a done job: the command sees its id, name, state, exit, duration, folder' '
	cd "$P" && ini "[train]" "command = sleep 1.2" "[notify]" "$ENVCMD" "local = none" &&
	"$GPURUN" -q train --name first.run_1 && id=$(latest) && d=$(jobdir "$id") && test -n "$d" &&
	wait_grep "notify command: exit 0" "$d/.gpurun/notify.log" &&
	tail -n1 "$d/.gpurun/notify.log" >last && test_grep -x "\[gpurun\] notify command: exit 0" last &&
	cat "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_ID=$id" "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_NAME=first.run_1" "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_STATE=done" "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_EXIT=0" "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_DURATION=[1-9][0-9]*" "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_DIR=$d" "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_GROUP=" "$TRASH/env"
'

test_expect_success 'a failing job (exit 3): failed, 3; the command runs in the job folder, its output and end logged' '
	cd "$P" && rm -f "$TRASH/env" &&
	ini "[train]" "command = exit 3" "[notify]" "${ENVCMD}; echo said-this; pwd; echo on-stderr >&2; exit 4" "local = none" &&
	test_expect_code 3 "$GPURUN" -q train && id=$(latest) && d=$(jobdir "$id") &&
	wait_grep "notify command: exit 4" "$d/.gpurun/notify.log" &&
	printf "said-this\n%s\non-stderr\n[gpurun] notify command: exit 4\n" "$d" >want &&
	test_cmp want "$d/.gpurun/notify.log" &&
	test_grep -x "GPURUN_JOB_STATE=failed" "$TRASH/env" && test_grep -x "GPURUN_JOB_EXIT=3" "$TRASH/env" &&
	test_grep -x "GPURUN_JOB_NAME=" "$TRASH/env"
'

test_expect_success 'a stopped job: stopped' '
	cd "$P" && rm -f "$TRASH/env" && ini "[train]" "command = exec sleep ${S}1" "stop_grace = 1" "[notify]" "$ENVCMD" &&
	id=$("$GPURUN" -q train --detach) && sleep 0.5 && "$GPURUN" -q stop "$id" &&
	d=$(jobdir "$id") && wait_grep "notify command: exit 0" "$d/.gpurun/notify.log" &&
	test_grep -x "GPURUN_JOB_STATE=stopped" "$TRASH/env" && test_grep -x "GPURUN_JOB_EXIT=143" "$TRASH/env"
'

test_expect_success 'a command that hangs is killed with its children at the bound; the status and the GPUs are not held' '
	cd "$P" && export GPURUN_NVIDIA_SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi GPURUN_NOTIFY_TIMEOUT=2 &&
	ini "[train]" "command = echo a" "gpus = 2" "[notify]" "command = sleep ${S}2 & sleep ${S}3" &&
	"$GPURUN" -q train >/dev/null && a=$(latest) && d=$(jobdir "$a") &&
	"$GPURUN" status "$a" >st && test_grep "done" st &&
	pgrep -f "^sleep ${S}3\$" &&
	ini "[train]" "command = echo b" "gpus = 2" &&
	"$GPURUN" -q train >outb && test_grep -x b outb && b=$(latest) && test "$a" != "$b" &&
	"$GPURUN" logs "$b" >lb && ! grep -q "waiting for" lb &&
	wait_grep "notify command: killed after 2 s" "$d/.gpurun/notify.log" 10 &&
	sleep 0.3 && ! pgrep -f "^sleep ${S}[23]\$" &&
	! test -e "$(jobdir "$b")/.gpurun/notify.log"
'
unset GPURUN_NVIDIA_SMI GPURUN_NOTIFY_TIMEOUT

test_expect_success 'values reach the command only through its environment: shell words in them do nothing' '
	H="$TRASH/h;touch INJ1;\$(touch INJ2)\`touch INJ3\`'"'"'\"" && mkdir -p "$H/.ssh" &&
	cd "$P" && ini "[train]" "command = true" "[notify]" "command = printf \"%s\n\" \"\$GPURUN_JOB_DIR\" \"\$GPURUN_JOB_NAME\" >$TRASH/vals" "local = none" &&
	HOME=$H "$GPURUN" -q train --name "x-\$y" 2>err; test_grep "name" err &&
	HOME=$H "$GPURUN" -q train --name "ok.name-2" && id=$(latest) &&
	d=$(HOME=$H; jobdir "$id") && test -n "$d" &&
	wait_grep "notify command: exit 0" "$d/.gpurun/notify.log" &&
	printf "%s\n%s\n" "$d" ok.name-2 >want && test_cmp want "$TRASH/vals" &&
	test -z "$(find "$TRASH" -name "INJ*")"
'

test_expect_success 'desktop: notify-send (first on PATH) gets the title and the end; none when the job had ended already' '
	cd "$P" && rm -f "$TRASH/desktop" && ini "[train]" "command = exit 2" "[notify]" "local = desktop" &&
	PATH=$TRASH/bin:$PATH DISPLAY=:99 test_expect_code 2 "$GPURUN" -q train --name deskjob 2>err &&
	! grep -q warning err && id=$(latest) &&
	printf "%s\n" --app-name=gpurun "gpurun: deskjob failed" "exited with status 2 (job $id)" -- >want &&
	test_cmp want "$TRASH/desktop" &&
	rm "$TRASH/desktop" && PATH=$TRASH/bin:$PATH DISPLAY=:99 test_expect_code 2 "$GPURUN" -q logs -f "$id" &&
	! test -e "$TRASH/desktop"
'

test_expect_success 'auto: desktop with a display; logs -f of a running job tells its end too' '
	cd "$P" && rm -f "$TRASH/desktop" && ini "[train]" "command = sleep 1" &&
	id=$("$GPURUN" -q train --detach) &&
	PATH=$TRASH/bin:$PATH WAYLAND_DISPLAY=wayland-0 "$GPURUN" logs -f "$id" 2>err &&
	test_grep -x "gpurun: $id done" "$TRASH/desktop" && test_grep -x "exited with status 0 (job $id)" "$TRASH/desktop"
'

test_expect_success 'desktop without notify-send: a warning, the exit status unchanged' '
	cd "$P" && ini "[train]" "command = true" "[notify]" "local = desktop" &&
	PATH=/usr/bin:/bin "$GPURUN" train >out 2>err &&
	test_grep "warning: \[notify\] local = desktop: notify-send is not on PATH" err
'

test_expect_success 'bell: on a terminal a BEL; into a pipe none' '
	cd "$P" && ini "[train]" "command = echo job-out" "[notify]" "local = bell" &&
	python3 "$TOP/tests/helpers/pty_run.py" pty "$GPURUN" train && test_grep job-out pty &&
	test $(tr -cd "\a" <pty | wc -c) = 1 &&
	"$GPURUN" train >out 2>err && test_grep job-out out &&
	test $(cat out err | tr -cd "\a" | wc -c) = 0
'

test_expect_success 'auto without a display rings on a terminal; -q and none do not' '
	cd "$P" && ini "[train]" "command = echo job-out" &&
	env -u DISPLAY -u WAYLAND_DISPLAY python3 "$TOP/tests/helpers/pty_run.py" pty "$GPURUN" train &&
	test $(tr -cd "\a" <pty | wc -c) = 1 &&
	env -u DISPLAY -u WAYLAND_DISPLAY python3 "$TOP/tests/helpers/pty_run.py" pty "$GPURUN" -q train &&
	test $(tr -cd "\a" <pty | wc -c) = 0 &&
	ini "[train]" "command = echo job-out" "[notify]" "local = none" &&
	python3 "$TOP/tests/helpers/pty_run.py" pty "$GPURUN" train &&
	test_grep job-out pty && test $(tr -cd "\a" <pty | wc -c) = 0
'

test_done
