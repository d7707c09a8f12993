#!/bin/bash
# Benchmark (not a test): connect + agent HELLO + `exec true` with gpurun's
# libssh2 transport, against OpenSSH's `ssh HOST true`, in the same run, on
# loopback and through the delay proxy (25 ms each way = 50 ms round trip);
# then, at 50 ms, exec, status, a no-op sync and `train` of `echo hi` (to
# its first log line) in round trips, from cold ([remote] persist = 0) and
# through a warm connection holder (the default), beside ssh cold and ssh
# over a warm ControlMaster.
#   tests/bench/bench_connect.sh [BUILD_DIR] [RUNS]     (default build, 15)
# Prints medians and the ratio gpurun/ssh (below 1.0 = gpurun is faster).
# OpenSSH 9 negotiates sntrup761x25519 (post-quantum, slower to compute) and
# libssh2 1.10 cannot: a second ssh column pins curve25519-sha256 to compare
# like with like.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-${GPURUN_BUILD:-build}}
case $B in /*) ;; *) B=$TOP/$B ;; esac
export GPURUN_BUILD=$B
RUNS=${2:-15}
. "$TOP/tests/lib.sh"
. "$TOP/tests/bench/bench_lib.sh"

[ -x "$GPURUN" ] || { say "no $GPURUN: run make first"; exit 1; }
# Cold unless a row says otherwise.
export GPURUN_REMOTE_PERSIST=0
start_sshd gpuhost >/dev/null || exit 1
trust_sshd gpuhost
mkdir -p "$TRASH/gpuhost-home/rproj" "$TRASH/p"
SSH="ssh -F $HOME/.ssh/config -o BatchMode=yes"

now_us() { echo $(( $(date +%s%N) / 1000 )); }

# time_cmd: microseconds one run of "$@" takes (output discarded).
time_cmd() {
	local t0
	t0=$(now_us)
	"$@" >/dev/null 2>&1 || { say "failed: $*"; echo failed; return; }
	echo $(( $(now_us) - t0 ))
}

# bench LABEL HOST: interleave gpurun and ssh runs, print one table row.
bench() {
	local label=$1 host=$2 g s c i
	printf "[remote]\nhost = %s\npath = rproj\n" "$host" > "$TRASH/p/gpurun.ini"
	# Warm up: the agent is uploaded once, then reused; caches are hot.
	(cd "$TRASH/p" && "$GPURUN" exec true) || { say "gpurun exec failed for $host"; return 1; }
	$SSH "$host" true || { say "ssh failed for $host"; return 1; }
	: > "$TRASH/g.$label"
	: > "$TRASH/s.$label"
	: > "$TRASH/c.$label"
	for i in $(seq 1 "$RUNS"); do
		(cd "$TRASH/p" && time_cmd "$GPURUN" exec true) >> "$TRASH/g.$label"
		time_cmd $SSH "$host" true >> "$TRASH/s.$label"
		time_cmd $SSH -o KexAlgorithms=curve25519-sha256 "$host" true >> "$TRASH/c.$label"
	done
	g=$(median < "$TRASH/g.$label")
	s=$(median < "$TRASH/s.$label")
	c=$(median < "$TRASH/c.$label")
	printf "%-24s %9s %9s %11s %9s %11s\n" "$label" "$(ratio "$g" 1000 %.1f)" \
		"$(ratio "$s" 1000 %.1f)" "$(ratio "$c" 1000 %.1f)" \
		"$(ratio "$g" "$s")" "$(ratio "$g" "$c")"
}

echo "connect + agent hello + exec true: median of $RUNS runs (ms)"
printf "%-24s %9s %9s %11s %9s %11s\n" "path" "gpurun" "ssh" "ssh-c25519" "g/ssh" "g/c25519"
bench "loopback" gpuhost

# Through the delay proxy: 25 ms each way.
# rtt_row LABEL CMD...: the median of RUNS runs in ms and in round trips.
rtt_row() {
	local label=$1 i m
	shift
	: >"$TRASH/rtt"
	for i in $(seq 1 "$RUNS"); do
		if [ "$1" = first_line ]; then
			(cd "$TRASH/p" && first_line) >>"$TRASH/rtt"
		else
			(cd "$TRASH/p" && time_cmd "$@") >>"$TRASH/rtt"
		fi
	done
	m=$(median <"$TRASH/rtt")
	printf "%-40s %9s %7s\n" "$label" "$(ratio "$m" 1000 %.1f)" "$(ratio "$m" 50000 %.1f)"
}

# first_line: microseconds until `gpurun train` prints its first log line.
first_line() {
	local t0
	t0=$(now_us)
	"$GPURUN" train 2>/dev/null | { IFS= read -r _l; echo $(( $(now_us) - t0 )); cat >/dev/null; }
}

if [ -x "$B/tests/delayproxy" ]; then
	start_proxy wan "$SSHD_PORT_gpuhost" 25 || exit 1
	ssh_host_via slowhost gpuhost "$PROXY_PORT_wan"
	bench "50 ms RTT (delay proxy)" slowhost
	# Each command from cold, in round trips (the proxy answers the TCP
	# handshake itself: add one on a real network, to every row alike),
	# beside ssh's cold and warm (ControlMaster) floors.
	printf "[remote]\nhost = slowhost\npath = rproj\n" >"$TRASH/p/gpurun.ini"
	for i in $(seq 1 1000); do echo "$i" >"$TRASH/p/f$i.txt"; done
	(cd "$TRASH/p" && "$GPURUN" sync -y >/dev/null 2>&1)
	echo
	echo "at 50 ms round trip, median of $RUNS runs"
	printf "%-40s %9s %7s\n" "command" "ms" "RTT"
	printf "[build]\ncommand =\n[train]\ncommand = echo hi\n" >>"$TRASH/p/gpurun.ini"
	rtt_row "gpurun exec true" "$GPURUN" exec true
	rtt_row "gpurun status" "$GPURUN" status
	rtt_row "gpurun sync, no-op (1000 files)" "$GPURUN" sync
	rtt_row "gpurun train echo hi, to its first line" first_line
	# Through the connection holder: started once, then reused.
	export GPURUN_REMOTE_PERSIST=10m
	(cd "$TRASH/p" && "$GPURUN" exec true)
	rtt_row "held: gpurun exec true" "$GPURUN" exec true
	rtt_row "held: gpurun status" "$GPURUN" status
	rtt_row "held: gpurun sync, no-op (1000 files)" "$GPURUN" sync
	rtt_row "held: gpurun train echo hi, to its first line" first_line
	stop_holders
	export GPURUN_REMOTE_PERSIST=0
	rtt_row "ssh HOST true" $SSH slowhost true
	rtt_row "ssh HOST true (curve25519)" $SSH -o KexAlgorithms=curve25519-sha256 slowhost true
	$SSH -o ControlMaster=yes -o ControlPath="$TRASH/cm" -o ControlPersist=300 slowhost true
	rtt_row "ssh HOST true (warm ControlMaster)" $SSH -o ControlPath="$TRASH/cm" slowhost true
	$SSH -O exit -o ControlPath="$TRASH/cm" slowhost 2>/dev/null
else
	echo "50 ms RTT (delay proxy)  skipped: no $B/tests/delayproxy (make unit-bins)"
fi
test_done
