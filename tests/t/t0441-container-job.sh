#!/bin/bash
# Jobs in a container ([container] image), with a real podman and a real
# dockerd of the test's own (tests/container.sh), each runtime skipped
# with its reason where it cannot start. On the local transport (the
# runtime found through the environment the agent inherits), per runtime:
# the log streams live and without the container terminal's \r, the exit
# status passes through; with [train] output = pipe, no terminal inside,
# stdout and stderr in order, a \r kept, PYTHONUNBUFFERED, stop; setup, build and the job run in the image, at the
# same paths; train -- CMD ARGS and [train] env / --env reach the image
# (sh and login shell); [container] options and mounts; outputs land in the job's folder and come back with pull,
# persistent paths are shared; files are written as the caller's uid:gid
# or [container] user; status and --json show the image; stop stops and
# removes the container (TERM, KILL after the grace); a job killed from
# outside (its container killed, its runtime client killed, its
# supervisor killed) leaves no container; doctor; a runtime that cannot
# be used fails the start. Then: GPUs through CDI (podman, a CDI spec of
# fake devices), the whole path over a real sshd, and a non-root account
# (docker) whose outputs are its own.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../container.sh"

T=$TRASH/out
mkdir -p "$T"
jobs_root() { echo "$HOME/.cache/gpurun/jobs"; }
last_id() { head -n1 "$P/.gpurun/jobs" | cut -f1; }
job_dir() { echo "$(jobs_root)"/*/"$1"; }
# wait_grep PATTERN FILE [SECONDS]
wait_grep() {
	for _i in $(seq 1 $((${3:-60} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
# wait_for CMD... [up to 60 s]: until CMD succeeds.
wait_for() {
	for _i in $(seq 1 600); do
		"$@" && return 0
		sleep 0.1
	done
	say "timed out waiting for: $*"; return 1
}
# ini RT LINES...: gpurun.ini on the local transport, jobs in the test image.
ini() {
	_rt=$1
	shift
	write_ini "$P" local local "$R"
	printf '[container]\nimage = %s\nruntime = %s\n' "$CONTAINER_IMAGE" "$_rt" >>"$P/gpurun.ini"
	for kv in "$@"; do printf '%s\n' "$kv"; done >>"$P/gpurun.ini"
}
# no_container RT ID: the runtime knows no container of job ID.
no_container() {
	ctr "$1" ps -a --filter "label=gpurun.job=$2" --format '{{.Names}}' >"$T/left" &&
	test_cmp /dev/null "$T/left"
}
has_container() {
	test "$(ctr "$1" ps --filter "label=gpurun.job=$2" --format '{{.Names}}')" = "gpurun-$2"
}
# bg_train: gpurun train in the background, its output in $T/out and
# $T/err, its exit code in $T/rc once it ends.
bg_train() {
	rm -f "$T/rc" "$T/out" "$T/err"
	{ "$GPURUN" train >"$T/out" 2>"$T/err"; echo $? >"$T/rc"; } &
}
# bg_logs ID: gpurun logs -f ID in the background, into $T/log.
bg_logs() {
	"$GPURUN" logs -f "$1" >"$T/log" 2>/dev/null &
}
# Whatever a failing case left running is stopped at exit.
stop_all() {
	for _p in "$TRASH"/proj-*; do
		[ -f "$_p/gpurun.ini" ] || continue
		(cd "$_p" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "starting" { print $1 }' |
			while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
	done
}
test_atexit stop_all

for rt in podman docker; do
	if ! why=$(container_missing $rt) && container_start $rt; then
		echo "# $rt: up in $(eval echo \$CONTAINER_START_SECONDS_$rt)s, image imported in $(eval echo \$CONTAINER_IMPORT_SECONDS_$rt)s"
	else
		test_skip "$rt: jobs in a container" "${why:-$CONTAINER_WHY}"
		continue
	fi
	# The agent (local transport) finds the test's instance as a host's
	# environment would point it there.
	eval "export $(container_env $rt)"
	# A project of its own per runtime.
	P=$TRASH/proj-$rt R=$TRASH/rproj-$rt
	mkdir -p "$P" "$R"

	# grep block-buffers a pipe (busybox's too: 1.5 s measured on a pipe,
	# 20 ms on a pty): its first line arrives while it runs only because
	# the container has a terminal.
	test_expect_success "$rt: the log streams live, as on the host (no \\r), the exit status passes" '
		cd "$P" && ini '$rt' "[train]" "command = { echo \"start \$GPURUN_JOB_ID\"; while [ ! -e go ]; do sleep 0.1; done; echo end; } | grep .; exit 3" &&
		bg_train && wait_grep "^start " $T/out && id=$(last_id) && test_grep -x "start $id" $T/out &&
		! test -e $T/rc && has_container '$rt' $id &&
		touch "$(job_dir $id)/go" && wait_for test -s $T/rc && test "$(cat $T/rc)" = 3 &&
		test_grep "exited with status 3" $T/err &&
		"$GPURUN" logs $id >$T/log &&
		printf "%s\n" "[gpurun] in a container: $CONTAINER_IMAGE ('$rt')" "start $id" end >$T/want &&
		test_cmp $T/want $T/log && no_container '$rt' $id
	'

	# [train] output = pipe: no -t, so the container's stdout and stderr
	# are the client's pipe (one, in order), and nothing to undo.
	test_expect_success "$rt: output = pipe: no terminal inside, stdout and stderr in order, PYTHONUNBUFFERED=1" '
		cd "$P" && ini '$rt' "[train]" "output = pipe" "command = if [ -t 1 ] || [ -t 2 ]; then echo tty; else echo no-tty; fi; for i in 1 2 3; do echo out \$i; echo err \$i >&2; done; printf \"a\\r\\nb\\n\"; echo PYU=\$PYTHONUNBUFFERED" &&
		"$GPURUN" -q train >$T/out 2>$T/err && id=$(last_id) &&
		printf "[gpurun] in a container: %s (%s)\nno-tty\nout 1\nerr 1\nout 2\nerr 2\nout 3\nerr 3\na\r\nb\nPYU=1\n" "$CONTAINER_IMAGE" '$rt' >$T/want &&
		test_cmp $T/want $T/out && no_container '$rt' $id
	'

	test_expect_success "$rt: output = pipe: stop sends TERM into the container, then removes it" '
		cd "$P" && ini '$rt' "[train]" "output = pipe" "command = trap \"echo got-term; exit 5\" TERM; echo ready; while :; do sleep 0.1; done" &&
		id=$("$GPURUN" -q train -d) && wait_for has_container '$rt' $id &&
		bg_logs $id && wait_grep ^ready $T/log &&
		"$GPURUN" stop $id 2>$T/err && test_grep "stopped and removed container gpurun-$id" $T/err &&
		no_container '$rt' $id && wait_grep got-term $T/log &&
		"$GPURUN" status $id >$T/st && test_grep "^$id  stopped " $T/st
	'

	test_expect_success "$rt: setup, build and job run in the image, at the host's paths, argv as written" '
		cd "$P" && ini '$rt' "[setup]" "command = cat /etc/gpurun-test-image; pwd" \
			"[build]" "command = cat /etc/gpurun-test-image; pwd" \
			"[train]" "command = cat /etc/gpurun-test-image; pwd; echo \"\$GPURUN_JOB_DIR \${CUDA_VISIBLE_DEVICES-none}\"; printf \"%s|\" \"a  b\" \"\\\$HOME\" \"x;y\"; echo" &&
		"$GPURUN" -q train >$T/out 2>$T/err && id=$(last_id) && d=$(job_dir $id) &&
		test "$(grep -c "^gpurun test image$" $T/out)" = 3 &&
		test_grep -x "$R" $T/out && test "$(grep -c -x "$d" $T/out)" = 2 &&
		test_grep -x "$d none" $T/out && test_grep -x "a  b|\$HOME|x;y|" $T/out &&
		no_container '$rt' $id
	'

	test_expect_success "$rt: train -- CMD ARGS reach the image word for word, [train] env and --env too" '
		cd "$P" && ini '$rt' "[train]" "command = false" "env = FROM_INI=\"a b,c\" OVERRIDE=ini" &&
		for sh in sh login; do
			"$GPURUN" -q -o train.shell=$sh train --env OVERRIDE=cli --env "EXTRA=x, y" -- \
				sh -c "cat /etc/gpurun-test-image; printf \"[%s]\" \"\$@\"; echo; echo \"\$FROM_INI/\$OVERRIDE/\$EXTRA\"" \
				sh "a  b" "\$HOME;x" "" "*" >$T/out 2>$T/err || { cat $T/err; return 1; }
			printf "%s\n" "[gpurun] in a container: $CONTAINER_IMAGE ('$rt')" "gpurun test image" \
				"[a  b][\$HOME;x][][*]" "a b,c/cli/x, y" >$T/want &&
			test_cmp $T/want $T/out || return 1
		done &&
		id=$(last_id) && "$GPURUN" status $id >$T/st && test_grep "(as words, without a shell)" $T/st &&
		no_container '$rt' $id
	'

	test_expect_success "$rt: outputs land in the job folder, as the caller; pull brings them; persistent paths are shared" '
		cd "$P" && ini '$rt' "[train]" "persist = checkpoints/" \
			"command = mkdir -p out && echo \"result of \$GPURUN_JOB_ID\" >out/r.txt && echo run >>checkpoints/runs.txt" \
			"[artifacts]" "pull = out/" &&
		"$GPURUN" -q train && id1=$(last_id) && "$GPURUN" -q train && id2=$(last_id) &&
		test "$(cat runs/$id2/out/r.txt)" = "result of $id2" &&
		test "$(cat "$(job_dir $id1)/out/r.txt")" = "result of $id1" &&
		test "$(stat -c %u:%g "$(job_dir $id2)/out/r.txt")" = "$(id -u):$(id -g)" &&
		test "$(cat $R/checkpoints/runs.txt)" = "$(printf "run\nrun")" &&
		rm -rf runs && "$GPURUN" -q pull $id1 && test "$(cat runs/$id1/out/r.txt)" = "result of $id1"
	'

	test_expect_success "$rt: [container] options go to the runtime as written, mounts are mounted" '
		cd "$P" && mkdir -p data && echo from-data >data/in.txt && mkdir -p "$HOME/shared-'$rt'" &&
		echo from-home >"$HOME/shared-'$rt'/h.txt" &&
		ini '$rt' "options = --env \"OPT_VAR=a  b\" --label=extra=1" "mounts = data:/data:ro" \
			"mounts = ~/shared-'$rt'" "[train]" \
			"command = cat /data/in.txt $HOME/shared-'$rt'/h.txt; echo \"[\$OPT_VAR]\"; if touch /data/x 2>/dev/null; then echo rw; else echo ro; fi" &&
		"$GPURUN" -q train >$T/out 2>$T/err && id=$(last_id) &&
		printf "%s\n" "[gpurun] in a container: $CONTAINER_IMAGE ('$rt')" from-data from-home "[a  b]" ro >$T/want && test_cmp $T/want $T/out &&
		no_container '$rt' $id &&
		ini '$rt' "mounts = no-such-dir:/x" "[train]" "command = touch $TRASH/ran-'$rt'" &&
		! "$GPURUN" -q train 2>$T/err && ! test -e $TRASH/ran-'$rt' &&
		test_grep "container mount .no-such-dir:/x.: cannot use .$R/no-such-dir.: No such file or directory" $T/err
	'

	test_expect_success "$rt: [container] user says who the job runs as" '
		cd "$P" && ini '$rt' "user = 4321:4322" "[train]" "command = echo \$(id -u):\$(id -g)" &&
		"$GPURUN" -q train >$T/out && test_grep -x 4321:4322 $T/out
	'

	test_expect_success "$rt: status and status --json show the image" '
		cd "$P" && id=$(last_id) && "$GPURUN" status >$T/st &&
		test_grep " IMAGE  *COMMAND\$" $T/st && test_grep "^$id .* $CONTAINER_IMAGE  echo " $T/st &&
		"$GPURUN" status $id >$T/st && test_grep -E "^image +$CONTAINER_IMAGE \('$rt'\)\$" $T/st &&
		"$GPURUN" status --json $id >$T/js &&
		python3 -c "import json,sys; j=json.load(open(sys.argv[1]))[\"jobs\"][0]; assert (j[\"image\"], j[\"runtime\"]) == (sys.argv[2], sys.argv[3]), j" $T/js "$CONTAINER_IMAGE" '$rt'
	'

	test_expect_success "$rt: stop sends TERM into the container, then removes it" '
		cd "$P" && ini '$rt' "[train]" "command = trap \"echo got-term; exit 5\" TERM; echo ready; while :; do sleep 0.1; done" &&
		id=$("$GPURUN" -q train -d) && wait_for has_container '$rt' $id &&
		bg_logs $id && wait_grep ^ready $T/log &&
		"$GPURUN" stop $id 2>$T/err && test_grep "stopped and removed container gpurun-$id" $T/err &&
		no_container '$rt' $id && wait_grep got-term $T/log &&
		"$GPURUN" status $id >$T/st && test_grep "^$id  stopped " $T/st
	'

	test_expect_success "$rt: a job that ignores TERM is killed after the grace period" '
		cd "$P" && ini '$rt' "[train]" "stop_grace = 2" "command = trap \"\" TERM; echo ready; while :; do sleep 0.1; done" &&
		id=$("$GPURUN" -q train -d) && wait_for has_container '$rt' $id &&
		wait_for sh -c "\"$GPURUN\" logs $id 2>/dev/null | grep -q ^ready" &&
		s=$(date +%s) && "$GPURUN" stop $id 2>$T/err && e=$(date +%s) &&
		test $((e - s)) -ge 2 && test_grep "stopped and removed container gpurun-$id" $T/err &&
		no_container '$rt' $id
	'

	test_expect_success "$rt: a container killed from outside ends the job; nothing is left" '
		cd "$P" && ini '$rt' "[train]" "command = echo ready; while :; do sleep 0.1; done" &&
		bg_train && wait_grep ^ready $T/out && id=$(last_id) && ctr '$rt' kill gpurun-$id >/dev/null &&
		wait_for test -s $T/rc && test "$(cat $T/rc)" = 137 && no_container '$rt' $id
	'

	test_expect_success "$rt: a killed runtime client takes its container with it" '
		cd "$P" && ini '$rt' "[train]" "command = echo ready; while :; do sleep 0.1; done" &&
		id=$("$GPURUN" -q train -d) && wait_for has_container '$rt' $id &&
		client=$(pgrep -f -- "--name=gpurun-$id ") && kill -9 $client &&
		wait_for sh -c "\"$GPURUN\" status $id | grep -q \"^$id  failed \"" &&
		no_container '$rt' $id && "$GPURUN" status --json $id >$T/js && test_grep "\"signal\": 9" $T/js
	'

	test_expect_success "$rt: a killed supervisor takes its container with it" '
		cd "$P" && ini '$rt' "[train]" "command = echo ready; while :; do sleep 0.1; done" &&
		id=$("$GPURUN" -q train -d) && wait_for has_container '$rt' $id &&
		sup=$(pgrep -f "gpurun-agent supervise .*/$id ") && kill -9 $sup &&
		wait_for no_container '$rt' $id &&
		wait_for sh -c "\"$GPURUN\" logs $id 2>/dev/null | grep -q \"supervisor ended without recording\"" &&
		"$GPURUN" status $id >$T/st && test_grep "^$id  lost " $T/st
	'

	test_expect_success "$rt: supervisor, reaper and client killed at once: rm refuses the running container until stop" '
		cd "$P" && ini '$rt' "[train]" "command = echo ready; while :; do sleep 0.1; done" &&
		id=$("$GPURUN" -q train -d) && wait_for has_container '$rt' $id &&
		# All at once, as an OOM kill takes them: each stopped first, so
		# none reacts to another dying in between (the reaper would remove
		# the container after the supervisor; the supervisor after the
		# client; the runtime client, hung up by the supervisor'"'"'s pty,
		# would pass the SIGHUP to the container: 1 run in 6 under load).
		pids="$(pgrep -f "gpurun-agent container-reap .*/$id") $(pgrep -f "gpurun-agent supervise .*/$id") $(pgrep -f -- "--name=gpurun-$id ")" &&
		echo "killing $pids" && { kill -STOP $pids; kill -9 $pids; sleep 2; } && has_container '$rt' $id &&
		"$GPURUN" status $id >$T/st && test_grep "^$id  lost " $T/st &&
		test_expect_code 1 "$GPURUN" rm $id 2>$T/err &&
		test_grep "job $id has .*still .*; stop it first: gpurun stop $id" $T/err &&
		"$GPURUN" prune --keep 1 2>$T/err && "$GPURUN" status $id >$T/st && test_grep "^$id  lost " $T/st &&
		"$GPURUN" stop $id 2>$T/err && no_container '$rt' $id &&
		"$GPURUN" rm $id 2>$T/err && test_grep "removed job $id" $T/err
	'

	test_expect_success "$rt: doctor names the runtime, the image, and what GPUs get" '
		cd "$P" && ini '$rt' && { "$GPURUN" doctor >$T/doc 2>&1; cat $T/doc; } &&
		test_grep -E "^ok +container +'$rt' " $T/doc && test_grep -E "^ok +image +$CONTAINER_IMAGE is on the host" $T/doc &&
		test_grep -E "^ok +ctr gpus +no GPUs on the host" $T/doc && test_grep -E "^skip +job env" $T/doc &&
		sed -i "s|^image = .*|image = localhost/gpurun-absent:1|" gpurun.ini &&
		{ "$GPURUN" doctor >$T/doc 2>&1 || :; } && test_grep -E "^warn +image +localhost/gpurun-absent:1 is not on the host yet" $T/doc
	'
done

# A runtime that cannot be used fails the start, before any job runs.
P=$TRASH/proj-none R=$TRASH/rproj-none
mkdir -p "$P" "$R"
if why=$(container_missing docker); then
	test_skip 'a runtime that does not answer fails the start, with why' "$why"
else
	test_expect_success 'a runtime that does not answer fails the start, with why' '
		cd "$P" && ini docker "[train]" "command = touch $TRASH/ran" &&
		{ DOCKER_HOST=unix://$TRASH/no-such.sock "$GPURUN" -q train 2>$T/err; rc=$?; cat $T/err; } &&
		test $rc != 0 && ! test -e $TRASH/ran &&
		test_grep "cannot start the job: no container runtime to run the image: .*docker does not answer" $T/err
	'
fi

test_done
