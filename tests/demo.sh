#!/bin/bash
# make demo: gpurun's main job end to end on the embedded defaults. A
# throwaway sshd on loopback (keys made here; the local transport where
# sshd cannot start) plays the GPU host; a copy of kernels/ is the
# project; `gpurun train` builds it there, trains on a small synthetic
# dataset with the log streamed live, and pulls the artifacts into
# runs/<job>/. Everything lives in one temp folder, removed at the end
# (DEMO_KEEP=1 keeps it; DEMO_TRANSPORT=local skips sshd).
#   tests/demo.sh [BUILD_DIR]
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
GPURUN=$BUILD/gpurun
[ -x "$GPURUN" ] || { echo "demo: $GPURUN is not built (run make)" >&2; exit 1; }

DEMO=$(mktemp -d "${TMPDIR:-/tmp}/gpurun-demo.XXXXXX")
SSHD_PID=
cleanup() {
	[ -n "$SSHD_PID" ] && kill "$SSHD_PID" 2>/dev/null
	if [ "${DEMO_KEEP:-0}" = 1 ]; then echo "demo: kept $DEMO"; else rm -rf "$DEMO"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then B=$(printf '\033[1m') N=$(printf '\033[0m'); else B= N=; fi
step() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
run() { printf '%s$ %s%s\n' "$B" "$*" "$N"; "$@"; }

# Everything gpurun and ssh write goes under the demo folder.
export HOME=$DEMO/home
GPUHOME=$DEMO/gpu-home
mkdir -p "$HOME/.ssh" "$GPUHOME" && chmod 700 "$HOME/.ssh"

step "a throwaway GPU host: sshd on loopback with keys made for this demo"
transport=openssh
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
start_sshd() {
	local d=$DEMO/sshd port
	command -v /usr/sbin/sshd >/dev/null 2>&1 || { echo "demo: no /usr/sbin/sshd"; return 1; }
	mkdir -p "$d" && { [ -d /run/sshd ] || mkdir -p /run/sshd 2>/dev/null || true; }
	ssh-keygen -q -t ed25519 -N '' -f "$d/hostkey" || return 1
	ssh-keygen -q -t ed25519 -N '' -C gpurun-demo -f "$HOME/.ssh/id_ed25519" || return 1
	cp "$HOME/.ssh/id_ed25519.pub" "$d/authorized_keys"
	port=$(free_port) || return 1
	cat >"$d/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
HostKey $d/hostkey
AuthorizedKeysFile $d/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PidFile $d/sshd.pid
SetEnv HOME=$GPUHOME
LogLevel ERROR
CFG
	/usr/sbin/sshd -f "$d/sshd_config" -E "$d/sshd.log" || { cat "$d/sshd.log" 2>/dev/null; return 1; }
	for _ in $(seq 1 50); do [ -s "$d/sshd.pid" ] && break; sleep 0.05; done
	[ -s "$d/sshd.pid" ] || return 1
	SSHD_PID=$(cat "$d/sshd.pid")
	cat >>"$HOME/.ssh/config" <<CFG
Host demo-gpu
	HostName 127.0.0.1
	Port $port
	User $(id -un)
	IdentityFile $HOME/.ssh/id_ed25519
	UserKnownHostsFile $HOME/.ssh/known_hosts
CFG
	printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$d/hostkey.pub")" >"$HOME/.ssh/known_hosts"
	echo "sshd listening on 127.0.0.1:$port (pid $SSHD_PID); its users' home is $GPUHOME"
}
if [ "${DEMO_TRANSPORT:-}" = local ]; then
	echo "demo: DEMO_TRANSPORT=local: the host is this machine, no sshd"
	transport=local
elif ! start_sshd; then
	echo "demo: sshd could not start here; using the local transport instead"
	transport=local
fi

step "a project: a copy of kernels/, and the gpurun.ini that 'gpurun init' writes for it"
PROJ=$DEMO/project
mkdir -p "$PROJ"
if git -C "$TOP" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$TOP" && git ls-files -z kernels | xargs -0 tar -cf - | tar -xf - -C "$PROJ")
else
	cp -r "$TOP/kernels" "$PROJ/" && rm -rf "$PROJ/kernels/build" "$PROJ/kernels/train"
fi
RPROJ=$GPUHOME/demo-project
cd "$PROJ" || exit 1
run "$GPURUN" init
# Only the host is ours to say: set [remote] host (and the path, transport).
if [ $transport = openssh ]; then
	# The default transport (libssh2); the host is an ssh_config alias.
	sed -i -e 's|^#host = .*|host = demo-gpu|' -e 's|^path = .*|path = demo-project|' gpurun.ini
else
	sed -i -e 's|^#host = .*|host = local|' -e "s|^path = .*|path = $RPROJ|" \
		-e 's|^transport = .*|transport = local|' gpurun.ini
	export HOME=$GPUHOME # the local "host" and gpurun share one home
	mkdir -p "$HOME"
fi
echo "(init saw kernels/ and wrote its build, command and artifacts; in effect:)"
for k in remote.host build.command train.command artifacts.pull; do
	printf '  %s = %s\n' "$k" "$("$GPURUN" config "$k" 2>/dev/null)"
done

step "check the connection (the agent is uploaded on first use)"
mkdir -p "$RPROJ" # the host is this machine: make its project folder
if ! run "$GPURUN" -v exec -- uname -sm; then
	[ $transport = openssh ] || exit 1
	echo "(the libssh2 transport failed; trying an ssh subprocess: transport = openssh)"
	printf 'transport = openssh\n' >>gpurun.ini
	run "$GPURUN" -v exec -- uname -sm || exit 1
fi

step "sync the project"
run "$GPURUN" sync || true
if [ ! -f "$RPROJ/kernels/Makefile" ]; then
	echo "(this build's sync sends nothing yet; copying the project to the host by hand)"
	cp -r "$PROJ/kernels" "$RPROJ/"
fi

step "train: build on the host, start the job, stream its log, pull its artifacts"
start=$(date +%s)
run "$GPURUN" train
rc=$?
echo "(gpurun train exited $rc after $(( $(date +%s) - start )) s)"
[ $rc = 0 ] || exit $rc

id=$(head -n1 .gpurun/jobs | cut -f1)
step "the artifacts, in runs/$id/"
run ls -l "runs/$id"
run head -n 3 "runs/$id/metrics.csv"
[ -s "runs/$id/ckpt.bin" ] && [ -s "runs/$id/metrics.csv" ] || { echo "demo: artifacts missing" >&2; exit 1; }

step "status, and the log's last lines again"
run "$GPURUN" status
run "$GPURUN" logs --tail 2

step "done: the job ran detached on the host; 'gpurun logs -f' would have reattached"
