#!/bin/bash
# The model-based randomized sync test (tests/sync_model.py): seeded
# batches of changes to a project, tampering on the host, lost local
# state, and syncs broken by faults (gpurun or the agent killed, the
# connection cut by the delay proxy, the host's disk full), each followed
# by a clean sync that must converge. A fixed set of seeds over the local
# transport and over libssh2 here; `make soak SEEDS=N` runs N seeds of 20
# batches (odd seeds local, even ones libssh2, two in every hundred with a
# tree of 100,000 files).
#   MODEL_SEEDS=A-B MODEL_BATCHES=N MODEL_BIG_EVERY=N  (defaults: 1-10, 10, none)
#   MODEL_LOG=FILE: every seed's line appended there too (make soak: BUILD/soak.log)
#   MODEL_ONLY=local|ssh: only that transport's half (make soak runs both at once)
. "$(dirname "$0")/../lib.sh"

SEEDS=${MODEL_SEEDS:-1-10}
BATCHES=${MODEL_BATCHES:-10}
BIG_EVERY=${MODEL_BIG_EVERY:-0}
MODEL=$TOP/tests/sync_model.py

# A file system of 1 GiB for each transport's remote folders, so a
# disk-full fault is one ballast file away (mounting needs root: without
# it, no disk-full faults). The local transport's is a tmpfs, where the
# agent's COMMIT makes files durable with syncfs; libssh2's a loop-mounted
# ext4 (no blocks reserved for root), where COMMIT waits for its own
# files' data and one journal commit, with an inode for every 4 KiB (the
# default, one for 16 KiB, is 65,536: a seed of 100,000 files, every
# hundredth, could not fit and failed with ENOSPC). MODEL_FS=tmpfs or
# ext4: both so.
# Sets TMPFS_<name> to the model's argument.
tmpfs_for() { # tmpfs_for NAME DEFAULT_FS
	_m=$TRASH/tmpfs-$1
	eval "TMPFS_$1="
	mkdir -p "$_m" || return 1
	if [ "$(id -u)" != 0 ]; then
		say "no tmpfs for $1 (not root): no disk-full faults"
	elif [ "${MODEL_FS:-$2}" = ext4 ] && command -v mkfs.ext4 >/dev/null && command -v losetup >/dev/null; then
		truncate -s 1g "$TRASH/fs-$1.img" &&
		mkfs.ext4 -q -F -m 0 -i 4096 "$TRASH/fs-$1.img" &&
		_dev=$(losetup --find --show "$TRASH/fs-$1.img") &&
		test_atexit "umount '$_m' 2>/dev/null; losetup -d '$_dev' 2>/dev/null" &&
		mount "$_dev" "$_m" && rmdir "$_m/lost+found" && chmod 755 "$_m" || return 1
		eval "TMPFS_$1=\"--tmpfs $_m\""
	elif mount -t tmpfs -o size=1g,mode=755 "gpurun-model-$1" "$_m"; then
		test_atexit "umount -l '$_m' 2>/dev/null"
		eval "TMPFS_$1=\"--tmpfs $_m\""
	else
		say "no tmpfs for $1: no disk-full faults"
	fi
}

# model NAME ARGS...: the model over one transport; its summary line shown.
model() {
	_name=$1
	shift
	python3 "$MODEL" --gpurun "$GPURUN" --work "$TRASH/work-$_name" --batches "$BATCHES" \
		--big-every "$BIG_EVERY" "$@" 2>&1 | tee -a "${MODEL_LOG:-/dev/null}" >"$TRASH/$_name.log"
	_rc=${PIPESTATUS[0]}
	grep -v "^ok - " "$TRASH/$_name.log" >&2
	tail -n 1 "$TRASH/$_name.log" >>"$TRASH/summary"
	return $_rc
}

PARITY=all
[ -n "${MODEL_SPLIT:-}" ] && PARITY=odd

test_expect_success 'setup: a tmpfs (local), an ext4 (libssh2) for the host folders' '
	tmpfs_for local tmpfs && tmpfs_for ssh ext4
'

ONLY=${MODEL_ONLY:-}

[ "$ONLY" != ssh ] && test_expect_success "model: seeds $SEEDS over the local transport" '
	model local --transport local --seeds "$SEEDS" --parity "$PARITY" \
		--agent-dir "$HOME/.cache/gpurun" $TMPFS_local
'

[ "$ONLY" != local ] && test_expect_success 'setup: sshd behind the delay proxy (which cuts connections on a signal)' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy model "$SSHD_PORT_gpuhost" &&
	ssh_host_via viaproxy gpuhost "$PROXY_PORT_model"
'

[ -n "${MODEL_SPLIT:-}" ] && PARITY=even
[ "$ONLY" != local ] && test_expect_success "model: seeds $SEEDS over libssh2, through the proxy" '
	model ssh --transport libssh2 --host viaproxy --proxy-pid "$PROXY_PID_model" \
		--seeds "$SEEDS" --parity "$PARITY" \
		--agent-dir "$TRASH/gpuhost-home/.cache/gpurun" $TMPFS_ssh
'

# What ran (tests/run.sh counts only the case lines).
sed 's/^/# /' "$TRASH/summary" 2>/dev/null
test_done
