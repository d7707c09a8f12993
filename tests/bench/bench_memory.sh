#!/bin/bash
# Benchmark (not a test): peak RSS of each side of a sync as the tree
# grows, against rsync -a in the same run (issue 36: "bench prints RSS per
# side at 1k-1M"). Empty files (so the walk and the manifests are what is
# measured, not the data), 1,000 a folder; for each size: the first sync,
# a no-op, a one-file edit, one with remote-KEY lost, one with it stale
# and one after a file was edited on the host, gpurun on a connection of its own ([remote] persist = 0: through
# a holder the client carries no SSH session) with the agent under
# /usr/bin/time behind sshd, then rsync -a the same way (its client, and
# its server process on the host side).
#   tests/bench/bench_memory.sh [BUILD_DIR]     (SIZES="1000 10000 100000 300000";
#   BENCH_BIG=1 adds 1000000)
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-${GPURUN_BUILD:-build}}
case $B in /*) ;; *) B=$TOP/$B ;; esac
export GPURUN_BUILD=$B
. "$TOP/tests/lib.sh"
. "$TOP/tests/bench/bench_lib.sh"

SIZES=${SIZES:-"1000 10000 100000 300000${BENCH_BIG:+ 1000000}"}
RH=$TRASH/gpuhost-home
export GPURUN_REMOTE_PERSIST=0
[ -x "$GPURUN" ] && [ -x /usr/bin/time ] || { say "needs $GPURUN (make) and /usr/bin/time"; exit 1; }
start_sshd gpuhost >/dev/null || exit 1
trust_sshd gpuhost
mkdir -p "$TRASH/boot" "$RH/boot" && write_ini "$TRASH/boot" gpuhost libssh2 boot &&
	"$GPURUN" -C "$TRASH/boot" exec true && agent_wrap "$RH" /usr/bin/time -a -f %M -o "$TRASH/agent.rss" || exit 1
SSH="ssh -F $HOME/.ssh/config -o BatchMode=yes"

# gp PROJECT: one gpurun sync; prints "client_KiB agent_KiB ms"
gp() {
	: >"$TRASH/agent.rss"
	local t0=$(date +%s%N)
	/usr/bin/time -f %M -o "$TRASH/client.rss" "$GPURUN" -C "$1" -q sync --yes >/dev/null 2>"$TRASH/gp.err" ||
		{ echo "failed"; cat "$TRASH/gp.err" >&2; return; }
	local t1=$(date +%s%N)
	for _i in $(seq 300); do [ -s "$TRASH/agent.rss" ] && break; sleep 0.1; done
	echo "$(tail -1 "$TRASH/client.rss") $(sort -n "$TRASH/agent.rss" | tail -1) $(( (t1 - t0) / 1000000 ))"
}
# rs SRC DST: one rsync -a over ssh, its server under /usr/bin/time
rs() {
	local t0=$(date +%s%N)
	/usr/bin/time -f %M -o "$TRASH/client.rss" rsync -a --delete -e "$SSH" \
		--rsync-path="/usr/bin/time -f %M -o $TRASH/rsyncd.rss rsync" "$1/" "gpuhost:$2/" || { echo failed; return; }
	local t1=$(date +%s%N)
	echo "$(tail -1 "$TRASH/client.rss") $(tail -1 "$TRASH/rsyncd.rss") $(( (t1 - t0) / 1000000 ))"
}
mib() { awk -v k="$1" 'BEGIN { if (k ~ /^[0-9]+$/) printf "%.1f", k / 1024; else printf "?" }'; }
row() { # row FILES CASE "gp: c a ms" "rs: c a ms"
	set -- "$1" "$2" $3 $4
	printf "%8s  %-10s %9s %9s %8s   %9s %9s %8s   %6s %6s\n" "$1" "$2" "$(mib "$3")" "$(mib "$4")" "$5" \
		"$(mib "$6")" "$(mib "$7")" "$8" \
		"$(awk -v a="$3" -v b="$6" 'BEGIN { printf "%.2f", a / b }')" \
		"$(awk -v a="$4" -v b="$7" 'BEGIN { printf "%.2f", a / b }')"
}

echo "peak RSS (MiB) per side; empty files, 1000 a folder; loopback sshd"
printf "%8s  %-10s %9s %9s %8s   %9s %9s %8s   %6s %6s\n" files case "gpurun" "agent" "ms" \
	"rsync" "rsync@host" "ms" "cl/rs" "ag/rs"
for n in $SIZES; do
	P=$TRASH/p$n
	many_files "$P" "$n" empty && write_ini "$P" gpuhost libssh2 "g$n" || exit 1
	mkdir -p "$RH/r$n"
	row "$n" first "$(gp "$P")" "$(rs "$P" "r$n")"
	row "$n" no-op "$(gp "$P")" "$(rs "$P" "r$n")"
	echo edit >"$P/d0/f1.txt"
	row "$n" "1 edit" "$(gp "$P")" "$(rs "$P" "r$n")"
	# the last state lost (a new clone into a filled folder, the sync
	# after a failed one): gpurun reads the host's manifest
	rm "$P"/.gpurun/remote-* && echo again >"$P/d0/f2.txt"
	row "$n" "state lost" "$(gp "$P")" "$(rs "$P" "r$n")"
	# ... stale (another clone synced since: an old remote-KEY put back)
	k=$(ls "$P"/.gpurun/remote-*) && cp "$k" "$TRASH/stale.key" &&
		echo more >"$P/d0/f3.txt" && gp "$P" >/dev/null &&
		cp "$TRASH/stale.key" "$k" && echo more >"$P/d0/f4.txt"
	row "$n" "stale" "$(gp "$P")" "$(rs "$P" "r$n")"
	# the host changed behind gpurun's back (a file edited there): its
	# changes come, not its manifest
	echo host >"$RH/g$n/d0/f5.txt" && echo again >"$P/d0/f6.txt"
	row "$n" "host chg" "$(gp "$P")" "$(rs "$P" "r$n")"
	rm -rf "$P" "$RH/g$n" "$RH/r$n"
done
test_done
