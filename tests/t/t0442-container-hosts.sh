#!/bin/bash
# Jobs in a container on hosts of different kinds (tests/container.sh):
# GPUs passed through CDI (podman reading a CDI spec of fake devices
# beside a recorded nvidia-smi: the container gets exactly the job's GPUs,
# numbered from 0), a host whose GPUs no container can get (docker without
# the NVIDIA toolkit: train and doctor say so), setup running again when
# the image changes, the whole path over a real sshd (libssh2), and
# non-root accounts (rootless podman, docker) whose job's files are their
# own.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../container.sh"

T=$TRASH/out
mkdir -p "$T"
SMI=$TOP/tests/data/nvidia-smi/fake-nvidia-smi
last_id() { head -n1 .gpurun/jobs | cut -f1; }
# ini DIR HOST TRANSPORT REMOTE RT LINES...
ini() {
	_d=$1
	write_ini "$1" "$2" "$3" "$4"
	printf '[container]\nimage = %s\nruntime = %s\n' "$CONTAINER_IMAGE" "$5" >>"$_d/gpurun.ini"
	shift 5
	for kv in "$@"; do printf '%s\n' "$kv"; done >>"$_d/gpurun.ini"
}
no_container() {
	test -z "$(ctr "$1" ps -a --filter "label=gpurun.job=$2" --format '{{.Names}}')"
}

have_podman=0 have_docker=0
for rt in podman docker; do
	if why=$(container_missing $rt) || ! container_start $rt; then
		eval "why_$rt=\${why:-\$CONTAINER_WHY}"
	else
		eval "have_$rt=1"
	fi
done

# ---- podman: CDI, setup and the image, ssh ----
if [ $have_podman = 0 ]; then
	for c in "GPUs go in through CDI, numbered from 0" "setup runs again when the image changes" \
		"a job in a container over a real sshd"; do
		test_skip "podman: $c" "$why_podman"
	done
else
	P=$TRASH/proj-p R=$TRASH/rproj-p
	mkdir -p "$P" "$R"
	# A CDI spec is the host's (/etc/cdi, /var/run/cdi): one test at a time
	# may have one there, and it goes at exit.
	CDI_SPEC=/var/run/cdi/gpurun-test-$$.json
	test_expect_success 'podman: GPUs go in through CDI, numbered from 0; doctor says how' '
		exec 9>/tmp/gpurun-test-cdi.lock && flock -w 600 9 &&
		{ test -d /var/run/cdi || { mkdir -p /var/run/cdi && touch $TRASH/made-cdi-dir; }; } &&
		test_atexit "rm -f $CDI_SPEC; test -e $TRASH/made-cdi-dir && rmdir /var/run/cdi; exec 9>&- 2>/dev/null" &&
		cat >$CDI_SPEC <<-JSON &&
		{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [
		 {"name": "0", "containerEdits": {"env": ["FAKE_CDI_GPU=0"]}},
		 {"name": "1", "containerEdits": {"env": ["FAKE_CDI_GPU=1"]}},
		 {"name": "all", "containerEdits": {"env": ["FAKE_CDI_GPU=all"]}}]}
		JSON
		eval "export $(container_env podman)" && export GPURUN_NVIDIA_SMI=$SMI && cd "$P" &&
		ini "$P" local local "$R" podman "[train]" "gpus = 1" \
			"command = echo \"cdi=\$FAKE_CDI_GPU cvd=\$CUDA_VISIBLE_DEVICES\"" &&
		"$GPURUN" -q train >$T/out && id=$(last_id) &&
		gpu=$("$GPURUN" status --json $id | python3 -c "import json,sys; print(\",\".join(map(str, json.load(sys.stdin)[\"jobs\"][0][\"gpus\"])))") &&
		test_grep -x "cdi=$gpu cvd=0" $T/out &&
		sed -i "s/^gpus = 1/gpus = all/" gpurun.ini && "$GPURUN" -q train >$T/out &&
		test_grep -x "cdi=all cvd=" $T/out &&
		{ "$GPURUN" doctor >$T/doc 2>&1; cat $T/doc; } &&
		test_grep -E "^ok +ctr gpus +CDI: .*$CDI_SPEC" $T/doc &&
		rm -f $CDI_SPEC && exec 9>&- && unset GPURUN_NVIDIA_SMI
	'

	test_expect_success 'podman: setup runs again when the image changes' '
		eval "export $(container_env podman)" && cd "$P" &&
		ctr podman tag $CONTAINER_IMAGE localhost/gpurun-test:other &&
		ini "$P" local local "$R" podman "[setup]" "command = echo setup-ran" "[train]" "command = true" &&
		"$GPURUN" -q train >$T/1 && "$GPURUN" -q train >$T/2 &&
		sed -i "s|^image = .*|image = localhost/gpurun-test:other|" gpurun.ini &&
		"$GPURUN" -q train >$T/3 &&
		test_grep -x setup-ran $T/1 && ! grep -x setup-ran $T/2 && test_grep -x setup-ran $T/3
	'

	test_expect_success 'podman: a job in a container over a real sshd' '
		start_sshd podhost "SetEnv HOME=$TRASH/podhost-home $(container_env podman)" && trust_sshd podhost &&
		P2=$TRASH/proj-ssh && mkdir -p $P2 && cd $P2 &&
		ini $P2 podhost libssh2 proj podman "[train]" "persist = checkpoints/" \
			"command = mkdir -p checkpoints && cat /etc/gpurun-test-image >checkpoints/where && pwd" &&
		"$GPURUN" -q train >$T/out && id=$(last_id) &&
		test_grep -x "$TRASH/podhost-home/.cache/gpurun/jobs/proj-.*/$id" $T/out &&
		test "$(cat $TRASH/podhost-home/proj/checkpoints/where)" = "gpurun test image" &&
		no_container podman $id
	'
fi

# ---- rootless podman: a non-root account's podman ----
if [ $have_podman = 0 ]; then
	test_skip "rootless podman: the job runs as the account, its files are its own" "$why_podman"
elif [ "$(id -u)" != 0 ]; then
	test_skip "rootless podman: the job runs as the account, its files are its own" "making an account needs root"
elif ! make_user V r; then
	test_skip "rootless podman: the job runs as the account, its files are its own" "useradd failed"
elif ! container_start_rootless "$V"; then
	test_skip "rootless podman: the job runs as the account, its files are its own" "$CONTAINER_WHY"
else
	test_expect_success 'rootless podman: the job runs as the account, its files are its own' '
		start_sshd_users pbox "SetEnv $CONTAINER_ROOTLESS_ENV" "$V" && trust_sshd pbox &&
		P4=$TRASH/proj-r && mkdir -p $P4 && cd $P4 &&
		ini $P4 pbox-$V libssh2 proj podman "[train]" "command = id -u; mkdir -p out && echo mine >out/f" &&
		{ "$GPURUN" -q train >$T/out 2>$T/err; rc=$?; cat $T/err; test $rc = 0; } && id=$(last_id) && VH=$(getent passwd $V | cut -d: -f6) &&
		test_grep -x "$(id -u $V)" $T/out &&
		f=$(echo $VH/.cache/gpurun/jobs/proj-*/$id/out/f) &&
		test "$(stat -c %u:%g $f)" = "$(id -u $V):$(id -g $V)" && test "$(cat $f)" = mine
	'
fi

# ---- docker: GPUs it cannot get, a non-root account ----
if [ $have_docker = 0 ]; then
	for c in "a host whose GPUs no container can get says so" "a non-root account's job writes files of its own"; do
		test_skip "docker: $c" "$why_docker"
	done
else
	P=$TRASH/proj-d R=$TRASH/rproj-d
	mkdir -p "$P" "$R"
	if command -v nvidia-container-runtime-hook >/dev/null || command -v nvidia-container-toolkit >/dev/null; then
		test_skip "docker: a host whose GPUs no container can get says so" "this host has the NVIDIA container toolkit"
	else
		test_expect_success 'docker: a host whose GPUs no container can get says so' '
			eval "export $(container_env docker)" && export GPURUN_NVIDIA_SMI=$SMI && cd "$P" &&
			ini "$P" local local "$R" docker "[train]" "gpus = 1" "command = echo cvd=\$CUDA_VISIBLE_DEVICES" &&
			"$GPURUN" train >$T/out 2>$T/err && test_grep "warning: this host has GPUs .* but no way to pass them into a docker container" $T/err &&
			test_grep -x "cvd=[01]" $T/out &&
			{ "$GPURUN" doctor >$T/doc 2>&1; cat $T/doc; } &&
			test_grep -E "^warn +ctr gpus +the host has GPUs .* no NVIDIA container toolkit" $T/doc &&
			test_grep "nvidia-ctk cdi generate" $T/doc && unset GPURUN_NVIDIA_SMI
		'
	fi

	if [ "$(id -u)" != 0 ]; then
		test_skip "docker: a non-root account's job writes files of its own" "making an account needs root"
	elif ! make_user U c; then
		test_skip "docker: a non-root account's job writes files of its own" "useradd failed"
	else
		test_expect_success "docker: a non-root account's job writes files of its own" '
			sock=$(cat $TRASH/docker/run.path)/docker.sock &&
			chmod 755 "$(dirname $sock)" && chmod 666 $sock &&
			start_sshd_users dbox "SetEnv $(container_env docker)" "$U" && trust_sshd dbox &&
			P3=$TRASH/proj-u && mkdir -p $P3 && cd $P3 &&
			ini $P3 dbox-$U libssh2 proj docker "[train]" "command = id -u; mkdir -p out && echo mine >out/f" &&
			"$GPURUN" -q train >$T/out && id=$(last_id) && UH=$(getent passwd $U | cut -d: -f6) &&
			test_grep -x "$(id -u $U)" $T/out &&
			f=$(echo $UH/.cache/gpurun/jobs/proj-*/$id/out/f) &&
			test "$(stat -c %u:%g $f)" = "$(id -u $U):$(id -g $U)" && no_container docker $id
		'
	fi
fi

test_done
