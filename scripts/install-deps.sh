#!/bin/sh
# Install the Debian packages gpurun builds and tests with, when missing.
# Called by the Makefile (make deps); safe to run again: it installs nothing
# that is already there, and does nothing at all when everything is present.
set -eu

# Build: the client's libraries, their static archives for the agent, and
# the static libs libarchive pulls in. Test: a real sshd, rsync as the
# benchmark peer, git as the ignore oracle, three shells for completions,
# python3 with venv for the Python project the job tests make, gawk for
# the benchmarks' medians (asort; mariadb-server pulled it in), man and
# groff to render the man page, and a one-node Slurm cluster
# (tests/slurm.sh): Debian 12's Slurm 22.05 with munge, and slurmdbd +
# mariadb for the tests that need sacct.
pkgs="build-essential pkg-config make
libssh2-1-dev librsync-dev libarchive-dev libinih-dev libzstd-dev
zlib1g-dev liblzma-dev liblz4-dev libbz2-dev libacl1-dev nettle-dev
libxml2-dev libicu-dev libssl-dev libb2-dev libxxhash-dev
openssh-server openssh-client rsync git zstd gzip clang libclang-rt-14-dev
bash-completion zsh fish tmux procps psmisc iproute2 python3 python3-venv bc gawk man-db groff-base
slurmctld slurmd slurm-client munge slurmdbd mariadb-server"

# Containers (tests/container.sh): rootful podman and docker's own daemon,
# both on runc (crun fails on hybrid cgroups; podman would pick crun, its
# first alternative), each runtime's init for --init (catatonit, tini via
# docker.io), and a static busybox to build the test image from, with no
# registry. busybox-static conflicts with busybox: either one will do.
# uidmap: newuidmap/newgidmap, for rootless podman (a non-root account).
pkgs="$pkgs strace"

# Every gpurun carries agents for linux-x86_64 and linux-aarch64: the
# other architecture's is built with Debian's cross compiler against the
# static libraries of Debian's packages for it (multiarch: dpkg learns the
# architecture before apt-get update, below). Only the four the agent
# links (the Makefile's AGENT_STATIC_LIBS). Test: qemu-user-static and
# binfmt-support run that agent here (tests/t/t0112-aarch64-agent.sh),
# file tells what a binary is built for.
case $(dpkg --print-architecture) in
amd64) xdeb=arm64 xgnu=aarch64 ;;
arm64) xdeb=amd64 xgnu=x86-64 ;;
*) xdeb= ;;
esac
if [ -n "$xdeb" ]; then
	pkgs="$pkgs gcc-$xgnu-linux-gnu"
	for p in libarchive-dev librsync-dev libb2-dev libzstd-dev; do
		pkgs="$pkgs $p:$xdeb"
	done
fi
pkgs="$pkgs qemu-user-static binfmt-support file"
# bench_watch's peer for sync --watch: inotifywait + rsync (mutagen is in
# neither Debian nor PyPI; PyPI's "mutagen" is an audio-tag library).
pkgs="$pkgs inotify-tools"
pkgs="$pkgs podman runc catatonit uidmap docker.io"
if ! dpkg-query -W -f='${Status}' busybox 2>/dev/null | grep -q 'install ok installed'; then
	pkgs="$pkgs busybox-static"
fi

missing=""
for p in $pkgs; do
	s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$s" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done

# Python tools from PyPI for the tests of the environments a project's
# setup makes (uv, poetry): in a venv of their own under /opt, never in
# the system's python (Debian's is externally managed). Without PyPI the
# tests that need them skip, saying why.
PYTOOLS=/opt/gpurun-pytools
pytools() {
	[ -x $PYTOOLS/bin/uv ] && [ -x $PYTOOLS/bin/poetry ] &&
		$PYTOOLS/bin/python -c 'import numpy' 2>/dev/null && return 0
	[ "$(id -u)" = 0 ] || return 0
	echo "install-deps: installing uv, poetry and numpy (kernels/bench/bench_cpu.sh's peer) from PyPI into $PYTOOLS" >&2
	{ python3 -m venv $PYTOOLS && $PYTOOLS/bin/pip install -q uv poetry numpy; } >&2 ||
		echo "install-deps: warning: cannot install uv and poetry from PyPI; their tests will skip" >&2
}

if [ -z "$missing" ]; then
	pytools
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
		echo "install-deps: missing packages:$missing" >&2
		echo "hint: run as root, or install them with apt-get" >&2
		exit 1
	fi
else
	SUDO=
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg (a second checkout installing at once) rather than fail.
APT="apt-get -o DPkg::Lock::Timeout=900"
case "$missing" in
*":$xdeb"*)
	dpkg --print-foreign-architectures | grep -qx "$xdeb" || $SUDO dpkg --add-architecture "$xdeb" ;;
esac
$SUDO $APT update -qq >&2
# shellcheck disable=SC2086
$SUDO $APT install -y -qq --no-install-recommends $missing >&2
pytools
