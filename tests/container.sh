# Container runtimes for the end-to-end tests, sourced after tests/lib.sh:
#
#   . "$(dirname "$0")/../lib.sh"
#   . "$(dirname "$0")/../container.sh"
#   for rt in podman docker; do
#       why=$(container_missing $rt) && { test_skip "$rt: ..." "$why"; continue; }
#       container_start $rt || { test_skip "$rt: ..." "$CONTAINER_WHY"; continue; }
#       start_sshd gpuhost "SetEnv HOME=$TRASH/gpuhost-home $(container_env $rt)"
#       ctr $rt ps -a      # the test's own instance, for checks
#   done
#
# Each runtime runs in isolation under $TRASH, so tests running at once on
# one machine (and the host's own containers) never see each other's:
# - podman (rootful): CONTAINERS_CONF and CONTAINERS_STORAGE_CONF point at
#   files under $TRASH/podman that put its storage, tmp dir, locks
#   (file locks, not the machine-wide shared-memory segment), events log and
#   network configs there; runc (crun fails on this kernel's hybrid cgroups),
#   cgroupfs, host network (no bridge, no firewall rules), and lower default
#   ulimits (podman asks for nofile=1048576, over this machine's hard 20000).
#   Its run root is a short folder /tmp/grp.XXXXXX (see _podman_start).
# - docker: a dockerd of its own, --data-root under $TRASH/docker, its exec
#   root, socket and pid file in a short folder /tmp/grd.XXXXXX (socket
#   addresses hold 108 bytes), no iptables, no bridge; the client reaches it
#   through DOCKER_HOST.
# The image (CONTAINER_IMAGE) is imported from a rootfs made here from
# busybox (no registry is reachable): /bin/sh and busybox's applets, and
# /etc/gpurun-test-image, which only the image has.
# container_stop (registered with test_atexit) removes exactly what
# container_start made: its containers, images and mounts, and the daemon
# it started, by pid.
#
# Sets CONTAINER_IMAGE; per runtime RT, CONTAINER_START_SECONDS_RT (runtime
# up and answering) and CONTAINER_IMPORT_SECONDS_RT (image imported).

CONTAINER_IMAGE=localhost/gpurun-test:busybox
# Generous on a loaded 2-core machine; dockerd answers in about a second.
CONTAINER_WAIT=${CONTAINER_WAIT:-60}
CONTAINER_WHY=""

# container_missing RT: prints why RT (podman or docker) cannot run here
# and succeeds, or prints nothing and fails when it can.
container_missing() {
	if [ "$(id -u)" != 0 ]; then [ "$1" = docker ] && echo "dockerd needs root" || echo "rootful podman needs root"; return 0; fi
	_busybox >/dev/null || { echo "no busybox for the test image (install busybox-static)"; return 0; }
	case $1 in
	podman)
		command -v podman >/dev/null 2>&1 || { echo "no podman (install podman)"; return 0; }
		command -v runc >/dev/null 2>&1 || { echo "no runc (install runc)"; return 0; } ;;
	docker)
		command -v docker >/dev/null 2>&1 || { echo "no docker client (install docker.io)"; return 0; }
		command -v dockerd >/dev/null 2>&1 || { echo "no dockerd (install docker.io)"; return 0; }
		command -v runc >/dev/null 2>&1 || { echo "no runc (install runc)"; return 0; } ;;
	*) echo "unknown runtime '$1'"; return 0 ;;
	esac
	return 1
}

# busybox, for the image: static (busybox-static) or with its libraries
# copied in (busybox).
_busybox() {
	for _b in /bin/busybox /usr/bin/busybox; do
		[ -x "$_b" ] && { echo "$_b"; return 0; }
	done
	return 1
}

# container_env RT: the environment that points RT's client at the test's
# instance, as NAME=VALUE words (for sshd's SetEnv or env(1)).
container_env() {
	case $1 in
	podman) echo "CONTAINERS_CONF=$TRASH/podman/containers.conf CONTAINERS_STORAGE_CONF=$TRASH/podman/storage.conf" ;;
	docker) echo "DOCKER_HOST=unix://$(cat "$TRASH/docker/run.path" 2>/dev/null)/docker.sock" ;;
	esac
}

# ctr RT ARGS...: RT's client against the test's instance.
ctr() {
	_rt=$1
	shift
	# shellcheck disable=SC2046
	env $(container_env "$_rt") "$_rt" "$@"
}

# The rootfs tarball, made once per test file: busybox and a link for each
# applet in /bin, /tmp, and an /etc/passwd that knows root and nobody.
_container_rootfs() {
	_tar=$TRASH/container-rootfs.tar
	[ -s "$_tar" ] && return 0
	_r=$TRASH/container-rootfs
	rm -rf "$_r"
	mkdir -p "$_r/bin" "$_r/etc" "$_r/tmp" "$_r/proc" "$_r/sys" "$_r/dev" || return 1
	chmod 1777 "$_r/tmp"
	cp "$(_busybox)" "$_r/bin/busybox" || return 1
	# A dynamic busybox brings its libraries, at the paths it looks for them.
	for _l in $(ldd "$_r/bin/busybox" 2>/dev/null | grep -o '/[^ ]*'); do
		mkdir -p "$_r$(dirname "$_l")" && cp -L "$_l" "$_r$_l" || return 1
	done
	for _a in $("$_r/bin/busybox" --list); do
		[ "$_a" = busybox ] || ln -s busybox "$_r/bin/$_a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$_r/etc/passwd"
	# Only the image has it: a step that reads it ran in a container.
	echo "gpurun test image" >"$_r/etc/gpurun-test-image"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$_r/etc/group"
	tar -C "$_r" -cf "$_tar.tmp" . && mv "$_tar.tmp" "$_tar"
}

_now() { date +%s.%N; }
_since() { echo "$1 $(_now)" | awk '{ printf "%.2f", $2 - $1 }'; }

# container_start RT: bring RT up under $TRASH and import the test image.
# On failure CONTAINER_WHY says why (for test_skip) and it fails.
container_start() {
	CONTAINER_WHY=$(container_missing "$1") && return 1
	CONTAINER_WHY=""
	_container_rootfs || { CONTAINER_WHY="cannot make the image's rootfs"; return 1; }
	test_atexit "container_stop $1"
	case $1 in
	podman) _podman_start ;;
	docker) _docker_start ;;
	esac || return 1
	_t0=$(_now)
	if ! ctr "$1" import "$TRASH/container-rootfs.tar" "$CONTAINER_IMAGE" >"$TRASH/$1/import.log" 2>&1; then
		CONTAINER_WHY="$1 import failed: $(tail -n 1 "$TRASH/$1/import.log")"
		return 1
	fi
	eval "CONTAINER_IMPORT_SECONDS_$1=$(_since "$_t0")"
	# One container, so a runtime that starts but cannot run one is a skip
	# with its reason, not a failure of every case after it.
	if ! ctr "$1" run --rm --network host "$CONTAINER_IMAGE" true >"$TRASH/$1/probe.log" 2>&1; then
		CONTAINER_WHY="$1 cannot run a container here: $(tail -n 1 "$TRASH/$1/probe.log")"
		return 1
	fi
	return 0
}

_podman_start() {
	_d=$TRASH/podman
	mkdir -p "$_d" || return 1
	_t0=$(_now)
	cat >"$_d/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
netns = "host"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$_d/events.log"
tmp_dir = "$_d/tmp"
lock_type = "file"
volume_path = "$_d/volumes"
# No image is ever pulled here: fail at once instead of retrying a registry.
pull_policy = "never"

[network]
network_config_dir = "$_d/net"
CONF
	# podman refuses a --runroot longer than 50 characters, and passes it so
	# to the cleanup process conmon starts when the container exits: with a
	# longer one cleanup fails and every "podman run" waits out conmon's 20 s
	# timeout before it returns. $TRASH is longer: the run root goes into a
	# short folder of its own.
	_rr=$(mktemp -d /tmp/grp.XXXXXX) || return 1
	echo "$_rr" >"$_d/runroot.path"
	cat >"$_d/storage.conf" <<CONF
[storage]
driver = "overlay"
runroot = "$_rr/run"
graphroot = "$_d/root"
CONF
	# The instance must be the test's own before anything is asked of it.
	_root=$(ctr podman info --format '{{.Store.GraphRoot}}' 2>"$_d/info.log") ||
		{ CONTAINER_WHY="podman does not start: $(tail -n 1 "$_d/info.log")"; return 1; }
	[ "$_root" = "$_d/root" ] ||
		{ CONTAINER_WHY="podman ignores CONTAINERS_STORAGE_CONF (storage at '$_root')"; return 1; }
	CONTAINER_START_SECONDS_podman=$(_since "$_t0")
}

_docker_start() {
	_d=$TRASH/docker
	mkdir -p "$_d" || return 1
	echo '{}' >"$_d/daemon.json"
	# Its sockets (its own, containerd's under the exec root) must fit in a
	# socket address (108 bytes): they go into a short folder of their own.
	_rr=$(mktemp -d /tmp/grd.XXXXXX) || return 1
	echo "$_rr" >"$_d/run.path"
	_t0=$(_now)
	dockerd --config-file "$_d/daemon.json" --data-root "$_d/data" --exec-root "$_rr/exec" \
		-H "unix://$_rr/docker.sock" --pidfile "$_rr/dockerd.pid" \
		--iptables=false --ip-masq=false --bridge=none --userland-proxy=false \
		>"$_d/dockerd.log" 2>&1 &
	echo $! >"$_d/dockerd.bgpid"
	for _i in $(seq 1 $((CONTAINER_WAIT * 10))); do
		ctr docker version >/dev/null 2>&1 && break
		kill -0 "$(cat "$_d/dockerd.bgpid")" 2>/dev/null || break
		sleep 0.1
	done
	if ! ctr docker version >/dev/null 2>&1; then
		CONTAINER_WHY="dockerd does not start: $(grep -v 'level=info' "$_d/dockerd.log" | tail -n 1)"
		return 1
	fi
	CONTAINER_START_SECONDS_docker=$(_since "$_t0")
}

# container_stop RT: remove what container_start RT made, and nothing else.
container_stop() {
	case $1 in
	podman)
		_d=$TRASH/podman
		[ -f "$_d/runroot.path" ] || return 0
		# Only ever against the test's own storage (checked, not assumed).
		if [ "$(ctr podman info --format '{{.Store.GraphRoot}}' 2>/dev/null)" = "$_d/root" ]; then
			ctr podman rm -a -f -t 0 >/dev/null 2>&1
			ctr podman rmi -a -f >/dev/null 2>&1
			ctr podman system reset -f >/dev/null 2>&1
		fi
		_container_umount_under "$_d/"
		_container_umount_under "$(cat "$_d/runroot.path")/"
		rm -rf "$(cat "$_d/runroot.path")" "$_d/runroot.path"
		;;
	docker)
		_d=$TRASH/docker
		[ -f "$_d/run.path" ] || return 0
		_p=$(cat "$_d/dockerd.bgpid" 2>/dev/null)
		if [ -n "$_p" ] && kill -0 "$_p" 2>/dev/null; then
			_c=$(ctr docker ps -a -q 2>/dev/null)
			[ -n "$_c" ] && ctr docker rm -f $_c >/dev/null 2>&1
			kill "$_p"
			for _i in $(seq 1 $((CONTAINER_WAIT * 10))); do
				kill -0 "$_p" 2>/dev/null || break
				sleep 0.1
			done
			kill -0 "$_p" 2>/dev/null && kill -9 "$_p"
		fi
		_container_umount_under "$_d/"
		_container_umount_under "$(cat "$_d/run.path")/"
		rm -rf "$(cat "$_d/run.path")" "$_d/run.path" "$_d/dockerd.bgpid"
		;;
	esac
	return 0
}

# Whatever is still mounted under a runtime's folder (dockerd leaves
# EXEC_ROOT/netns/default; podman its overlay home), innermost first.
_container_umount_under() {
	awk -v d="$1" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r _m; do umount "$_m" 2>/dev/null || umount -l "$_m"; done
}

# container_start_rootless USER: rootless podman for an account (made
# with make_user): its storage in the account's home, its run root and
# tmp dir in a short folder of its own, the test image imported as it.
# Sets CONTAINER_ROOTLESS_ENV (NAME=VALUE words for sshd's SetEnv); on
# failure CONTAINER_WHY says why.
container_start_rootless() {
	_u=$1
	CONTAINER_WHY=$(container_missing podman) && return 1
	command -v newuidmap >/dev/null 2>&1 ||
		{ CONTAINER_WHY="rootless podman needs newuidmap (install uidmap)"; return 1; }
	grep -q "^$_u:" /etc/subuid 2>/dev/null ||
		{ CONTAINER_WHY="no /etc/subuid range for $_u (useradd made none)"; return 1; }
	_container_rootfs || { CONTAINER_WHY="cannot make the image's rootfs"; return 1; }
	_h=$(getent passwd "$_u" | cut -d: -f6)
	_rr=$(mktemp -d /tmp/grr.XXXXXX) || return 1
	chown "$_u" "$_rr" && chmod 700 "$_rr" || return 1
	test_atexit "container_stop_rootless $_u $_rr"
	cat >"$_rr/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
netns = "host"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$_rr/events.log"
tmp_dir = "$_rr/tmp"
lock_type = "file"
pull_policy = "never"
CONF
	cat >"$_rr/storage.conf" <<CONF
[storage]
driver = "overlay"
runroot = "$_rr/run"
graphroot = "$_h/.local/share/containers/storage"
CONF
	cp "$TRASH/container-rootfs.tar" "$_rr/rootfs.tar" &&
		chown "$_u" "$_rr"/* || return 1
	CONTAINER_ROOTLESS_ENV="CONTAINERS_CONF=$_rr/containers.conf CONTAINERS_STORAGE_CONF=$_rr/storage.conf XDG_RUNTIME_DIR=$_rr"
	# shellcheck disable=SC2086
	if ! (cd "$_rr" && runuser -u "$_u" -- env HOME="$_h" $CONTAINER_ROOTLESS_ENV \
		podman import "$_rr/rootfs.tar" "$CONTAINER_IMAGE") >"$TRASH/rootless-import.log" 2>&1; then
		CONTAINER_WHY="rootless podman import failed: $(tail -n 1 "$TRASH/rootless-import.log")"
		return 1
	fi
	# shellcheck disable=SC2086
	if ! (cd "$_rr" && runuser -u "$_u" -- env HOME="$_h" $CONTAINER_ROOTLESS_ENV \
		podman run --rm "$CONTAINER_IMAGE" true) >"$TRASH/rootless-probe.log" 2>&1; then
		CONTAINER_WHY="rootless podman cannot run a container here: $(tail -n 1 "$TRASH/rootless-probe.log")"
		return 1
	fi
}

# container_stop_rootless USER RUNDIR: its containers and storage go (the
# account's processes, its pause process among them, go with the account).
container_stop_rootless() {
	_h=$(getent passwd "$1" | cut -d: -f6)
	[ -n "$_h" ] && (cd "$2" && runuser -u "$1" -- env HOME="$_h" CONTAINERS_CONF="$2/containers.conf" \
		CONTAINERS_STORAGE_CONF="$2/storage.conf" XDG_RUNTIME_DIR="$2" \
		podman system reset -f) >/dev/null 2>&1
	rm -rf "$2"
}
