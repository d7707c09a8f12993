#!/bin/bash
# Benchmark at real sizes (opt-in: BENCH_BIG=1 make bench, or run it): each
# case against its peer, interleaved in the same run, through the delay
# proxy (bytes on the wire are the proxy's count, ssh included). Which tool
# goes first alternates from round to round (use an even RUNS): on a VM
# that returns free memory to its host (virtio-balloon free page
# reporting), page cache that was not touched lately costs ~10 us a page
# on first use, so writing 2 GiB took 1.0-1.3 s or 6.3-9.0 s depending on
# what ran before; a fixed order gave that to the same tool every time.
#   big1      first sync of one 2 GiB random file        (rsync -az, scp)
#   bigedit   that file with 1 MiB changed + 16 MiB appended (rsync -az)
#   bigregen  that file regenerated whole, same size       (rsync -az, scp)
#   tree      first sync of 100,000 files (~120 MB)        (rsync -az, tar|zstd|ssh)
#   treewan   that first sync at 50 ms RTT, 100 Mbit          (rsync -az, tar|zstd|ssh)
#   treenoop  no-op sync of those files, 50 ms RTT at 100 Mbit (rsync -az)
#   huge      first sync of a 20 GiB sparse file: peak RSS only (BENCH_HUGE=1)
# Every row: wall time, bytes on the wire, client CPU (user+sys), the
# client's and the host side's peak RSS (gpurun-agent's; rsync's server;
# "-" where a pipe has no single process).
#   tests/bench/bench_big.sh                    (RUNS=4 by default)
#   RUNS=1 CASES="tree treenoop" TREE_FILES=20000 tests/bench/bench_big.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"

RUNS=${RUNS:-4}
CASES=${CASES:-"big1 bigedit bigregen tree treewan treenoop"}
[ -z "${BENCH_HUGE:-}" ] || CASES="$CASES huge"
BIG_MB=${BIG_MB:-2048}
TREE_FILES=${TREE_FILES:-100000}
HUGE_GB=${HUGE_GB:-20}
TRANSPORT=${TRANSPORT:-libssh2}
WAN_RATE=12500000 # bytes/s each way: 100 Mbit
RH=$TRASH/gpuhost-home
OUT=$TRASH/results
: >"$OUT"
SSHCFG=$HOME/.ssh/config

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# The agent runs under /usr/bin/time, which appends its peak RSS (KiB) to
# $TRASH/srv.rss; rsync's server likewise through --rsync-path.
wrap_agent() { agent_wrap "$RH" /usr/bin/time -a -f %M -o "$TRASH/srv.rss"; }
RSYNC_PATH="/usr/bin/time -a -f %M -o $TRASH/srv.rss rsync"

# measure CASE TOOL PROXY CMDLINE: run once (sh -c: the client's peak RSS
# is its biggest process's, as wait4 reports it); append "CASE TOOL ms bytes
# cpu_ms client_kib server_kib" to $OUT ("failed" in every column when the
# command fails). Written back to disk first, so no run pays for another.
measure() {
	local c=$1 t=$2 px=$3 b0 b1 t0 t1 cpu rss srv
	shift 3
	sync
	sleep 0.3
	: >"$TRASH/srv.rss"
	b0=$(proxy_bytes "$px")
	t0=$(now_ms)
	if ! /usr/bin/time -f '%U %S %M' -o "$TRASH/cl.time" sh -c "$1" >/dev/null 2>"$TRASH/cmd.err"; then
		say "$c $t failed:"
		head -5 "$TRASH/cmd.err" >&2
		echo "$c $t failed failed failed failed failed" >>"$OUT"
		return 1
	fi
	t1=$(now_ms)
	sleep 0.3 # the proxy writes its counters every 100 ms and at a close
	b1=$(proxy_bytes "$px")
	set -- $(tail -1 "$TRASH/cl.time")
	cpu=$(awk -v u="$1" -v s="$2" 'BEGIN{printf "%d", (u + s) * 1000}')
	rss=$3
	srv=$(sort -n "$TRASH/srv.rss" | tail -1)
	echo "$c $t $((t1 - t0)) $((b1 - b0)) $cpu $rss ${srv:--}" >>"$OUT"
	[ -z "${BENCH_RAW:-}" ] || say "$c $t $((t1 - t0)) ms $((b1 - b0)) B cpu $cpu ms rss $rss/${srv:--} KiB"
	[ -z "${BENCH_TRACE:-}" ] || ! grep -q 'sync: tar level' "$TRASH/cmd.err" ||
		say "$c $t tar levels: $(sed -n 's/.*sync: tar level \([0-9]*\).*/\1/p' "$TRASH/cmd.err" | tr '\n' ' ')"
}

# A pipe's peak RSS is no one process's: "-".
measure_pipe() {
	measure "$@" || return 1
	awk 'NR == n { $6 = "-"; $7 = "-" } { print }' n="$(wc -l <"$OUT")" "$OUT" >"$OUT.t" && mv "$OUT.t" "$OUT"
}

# The commands measured (programs, for /usr/bin/time): rsync_to SRC HOST
# DST; gpurun_sync PROJECT; tar_zstd_ssh SRC HOST DST. DST is under the
# host's home, given whole: ssh starts in the passwd entry's home.
RSYNC="rsync -az --exclude=/.gpurun/ --exclude=/gpurun.ini"
rsync_to() {
	echo $RSYNC --rsync-path="'$RSYNC_PATH'" -e "'ssh -F $SSHCFG -o BatchMode=yes'" "$1/" "$2:$RH/$3/"
}
# BENCH_TRACE=1: gpurun traces (GPURUN_TRACE), and measure prints the
# levels its tar stream went through.
gpurun_sync() { echo ${BENCH_TRACE:+GPURUN_TRACE=1} "$GPURUN" -C "$1" -q sync --yes; }
# scp's own protocol (-O): OpenSSH's scp speaks SFTP otherwise, which the
# test sshd does not serve; the file into DST (made here, on one machine).
scp_to() {
	mkdir -p "$RH/$3"
	echo scp -O -q -F "$SSHCFG" -o BatchMode=yes "$1" "$2:$RH/$3/"
}
# TZ_DURABLE=1: the peer makes what it wrote durable too (sync -f, one
# syncfs of the host's file system, as gpurun's COMMIT does past 4,096
# small files): what a copy that survives a crash costs.
tar_zstd_ssh() {
	echo "tar -C $1 --exclude=./.gpurun --exclude=./gpurun.ini -cf - . | zstd -q -c |" \
		"ssh -F $SSHCFG -o BatchMode=yes $2 'mkdir -p $RH/$3 && zstd -q -dc | tar -C $RH/$3 -xf -${TZ_DURABLE:+ && sync -f $RH/$3}'"
}

# Earlier copies are moved aside, not deleted (see bench_sync.sh: ext4's
# allocator steps over freshly freed inodes); they go when the bench ends.
fresh() { # fresh PROJECT DST...
	local p=$1 old=$TRASH/old/$(date +%s%N) d
	shift
	mkdir -p "$old"
	for d in "$@"; do
		[ ! -e "$RH/$d" ] || mountpoint -q "$RH/$d" || mv "$RH/$d" "$old/"
	done
	rm -rf "$p/.gpurun/remote-"* "$p/.gpurun/sigs" "$p/.gpurun/index"
}


# The tree case's copies each land on a file system of their own
# (fresh_fs, bench_lib.sh).
fs_setup "$RH"

setup_project() { # setup_project DIR HOST DST: gpurun.ini, agent uploaded and wrapped
	write_ini "$1" "$2" "$TRANSPORT" "$3"
	mkdir -p "$RH/$3"
	"$GPURUN" -C "$1" exec true >/dev/null || return 1
	wrap_agent
}

big1_rsync() { measure big1 rsync loopback "$(rsync_to "$p" vialo big-rs)"; }
big1_gpurun() { measure big1 gpurun loopback "$(gpurun_sync "$p")"; }
big1_scp() { measure big1 scp loopback "$(scp_to "$p/model.ckpt" vialo big-scp)"; }
case_big1() {
	local p=$TRASH/big i
	mkdir -p "$p"
	head -c "$((BIG_MB << 20))" /dev/urandom >"$p/model.ckpt"
	setup_project "$p" vialo big-gp || return 1
	for i in $(seq 1 "$RUNS"); do
		fresh "$p" big-gp big-rs big-scp
		in_turn "$i" big1_rsync big1_gpurun big1_scp
	done
	cmp -s "$p/model.ckpt" "$RH/big-gp/model.ckpt" || { say "big1: gpurun's copy differs"; return 1; }
}

bigedit_rsync() { measure bigedit rsync loopback "$(rsync_to "$p" vialo big-rs)"; }
bigedit_gpurun() { measure bigedit gpurun loopback "$(gpurun_sync "$p")"; }
case_bigedit() {
	local p=$TRASH/big i
	[ -f "$RH/big-gp/model.ckpt" ] || CASES=big1 case_big1 || return 1
	[ -f "$RH/big-rs/model.ckpt" ] || sh -c "$(rsync_to "$p" vialo big-rs)" >/dev/null || return 1
	for i in $(seq 1 "$RUNS"); do
		python3 - "$p/model.ckpt" "$i" <<'PY'
import os, sys
path, k = sys.argv[1], int(sys.argv[2])
with open(path, 'r+b') as f:
    size = f.seek(0, 2)
    f.seek(size // 3 + k * 7919 * 4096 % (size // 3))
    f.write(os.urandom(1 << 20))
    f.seek(0, 2)
    f.write(os.urandom(16 << 20))
PY
		in_turn "$i" bigedit_rsync bigedit_gpurun
	done
	cmp -s "$p/model.ckpt" "$RH/big-gp/model.ckpt" || { say "bigedit: gpurun's copy differs"; return 1; }
}

bigregen_rsync() { measure bigregen rsync loopback "$(rsync_to "$p" vialo big-rs)"; }
bigregen_gpurun() { measure bigregen gpurun loopback "$(gpurun_sync "$p")"; }
bigregen_scp() { measure bigregen scp loopback "$(scp_to "$p/model.ckpt" vialo big-scp)"; }
case_bigregen() {
	local p=$TRASH/big i size
	[ -f "$RH/big-gp/model.ckpt" ] || CASES=big1 case_big1 || return 1
	[ -f "$RH/big-rs/model.ckpt" ] || sh -c "$(rsync_to "$p" vialo big-rs)" >/dev/null || return 1
	[ -f "$RH/big-scp/model.ckpt" ] || sh -c "$(scp_to "$p/model.ckpt" vialo big-scp)" >/dev/null || return 1
	size=$(stat -c %s "$p/model.ckpt")
	for i in $(seq 1 "$RUNS"); do
		head -c "$size" /dev/urandom >"$p/model.ckpt.new" && mv "$p/model.ckpt.new" "$p/model.ckpt"
		in_turn "$i" bigregen_rsync bigregen_gpurun bigregen_scp
	done
	cmp -s "$p/model.ckpt" "$RH/big-gp/model.ckpt" || { say "bigregen: gpurun's copy differs"; return 1; }
}

make_tree() {
	python3 - "$1" "$TREE_FILES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(7)
words = [b'model', b'loss', b'grad', b'batch', b'layer', b'self', b'tensor', b'optim', b'step',
         b'epoch', b'config', b'data', b'return', b'import', b'torch', b'np', b'lr', b'weight']
for i in range(n):
    d = os.path.join(root, 'src', 'pkg%03d' % (i % 500), 'mod%d' % (i % 4))
    os.makedirs(d, exist_ok=True)
    size, out = rnd.randint(200, 2200), []
    while size > 0:
        w = rnd.choice(words) + b'%d ' % rnd.randint(0, 99999)
        out.append(w)
        size -= len(w)
    open(os.path.join(d, 'f%06d.py' % i), 'wb').write(b''.join(out))
PY
}

# first_tree NAME HOST PROFILE: the tree's first sync by each tool in
# turn, through HOST (vialo: loopback; viawan: the WAN proxy, where the
# link limits, not the CPU, and bytes on the wire are time); the
# functions below read NAME, HOST and PROFILE as first_tree's locals.
tree_rsync() { measure "$name" rsync "$prof" "$(rsync_to "$p" "$host" tree-rs)"; }
tree_gpurun() { measure "$name" gpurun "$prof" "$(gpurun_sync "$p")"; }
tree_tz() { measure_pipe "$name" tar_zstd_ssh "$prof" "$(tar_zstd_ssh "$p" "$host" tree-tz)"; }
first_tree() {
	local name=$1 host=$2 prof=$3 p=$TRASH/tree i
	[ -d "$p" ] || make_tree "$p"
	setup_project "$p" "$host" tree-gp || return 1
	for i in $(seq 1 "$RUNS"); do
		fresh "$p" tree-gp tree-rs tree-tz
		fresh_fs "$RH" tree-gp tree-rs tree-tz || return 1
		in_turn "$i" tree_rsync tree_gpurun tree_tz
	done
	tree_sig "$RH/tree-gp" gpurun.ini >"$TRASH/a.sig"
	tree_sig "$RH/tree-rs" >"$TRASH/b.sig"
	cmp -s "$TRASH/a.sig" "$TRASH/b.sig" || { say "$name: gpurun's and rsync's copies differ"; return 1; }
	[ "$host" = vialo ] || write_ini "$p" vialo "$TRANSPORT" tree-gp
}
case_tree() { first_tree tree vialo loopback; }
case_treewan() { first_tree treewan viawan wan; }

treenoop_rsync() { measure treenoop rsync wan "$(rsync_to "$p" viawan tree-rs)"; }
treenoop_gpurun() { measure treenoop gpurun wan "$(gpurun_sync "$p")"; }
case_treenoop() {
	local p=$TRASH/tree i
	[ -d "$p" ] || make_tree "$p"
	[ -f "$p/gpurun.ini" ] || setup_project "$p" vialo tree-gp || return 1
	# the copies must be there (a first sync if the tree case did not run)
	sh -c "$(gpurun_sync "$p")" >/dev/null || return 1
	[ -d "$RH/tree-rs" ] || sh -c "$(rsync_to "$p" vialo tree-rs)" >/dev/null || return 1
	write_ini "$p" viawan "$TRANSPORT" tree-gp
	sh -c "$(gpurun_sync "$p")" >/dev/null || return 1 # this host name's state, learnt once
	for i in $(seq 1 "$RUNS"); do
		in_turn "$i" treenoop_rsync treenoop_gpurun
	done
	write_ini "$p" vialo "$TRANSPORT" tree-gp
}

case_huge() {
	local p=$TRASH/huge
	mkdir -p "$p"
	truncate -s "${HUGE_GB}G" "$p/sparse.bin"
	setup_project "$p" vialo huge-gp || return 1
	measure huge gpurun loopback "$(gpurun_sync "$p")"
	rm -rf "$RH/huge-gp"
}

report() {
	local c t f
	printf '\n%-9s %-13s %9s %7s %13s %7s %9s %11s %11s\n' case tool "time ms" "x peer" \
		"wire B" "x peer" "cpu ms" "client KiB" "host KiB"
	for c in $CASES; do
		for t in rsync gpurun scp tar_zstd_ssh; do
			grep -q "^$c $t " "$OUT" || continue
			set --
			for f in 3 4 5 6 7; do
				set -- "$@" "$(awk -v c="$c" -v t="$t" -v f="$f" '$1==c && $2==t {print $f}' "$OUT" | median)"
			done
			local pt pb
			pt=$(awk -v c="$c" '$1==c && $2=="rsync" {print $3}' "$OUT" | median)
			pb=$(awk -v c="$c" '$1==c && $2=="rsync" {print $4}' "$OUT" | median)
			[ "$t" != rsync ] || { pt=; pb=; }
			printf '%-9s %-13s %9s %7s %13s %7s %9s %11s %11s\n' "$c" "$t" "$1" \
				"$([ -n "$pt" ] && ratio "$1" "$pt" || echo '')" "$2" \
				"$([ -n "$pb" ] && ratio "$2" "$pb" || echo '')" "$3" "$4" "$5"
		done
	done
	for c in big1 bigregen; do
		grep -q "^$c scp " "$OUT" || continue
		printf '%s: gpurun / scp time: %s, cpu: %s\n' "$c" "$(ratio \
			"$(awk -v c="$c" '$1==c && $2=="gpurun" {print $3}' "$OUT" | median)" \
			"$(awk -v c="$c" '$1==c && $2=="scp" {print $3}' "$OUT" | median)")" "$(ratio \
			"$(awk -v c="$c" '$1==c && $2=="gpurun" {print $5}' "$OUT" | median)" \
			"$(awk -v c="$c" '$1==c && $2=="scp" {print $5}' "$OUT" | median)")"
	done
	for c in tree treewan; do
		grep -q "^$c tar_zstd_ssh " "$OUT" || continue
		printf '%s: gpurun / tar|zstd|ssh time: %s, bytes: %s\n' "$c" "$(ratio \
			"$(awk -v c="$c" '$1==c && $2=="gpurun" {print $3}' "$OUT" | median)" \
			"$(awk -v c="$c" '$1==c && $2=="tar_zstd_ssh" {print $3}' "$OUT" | median)")" "$(ratio \
			"$(awk -v c="$c" '$1==c && $2=="gpurun" {print $4}' "$OUT" | median)" \
			"$(awk -v c="$c" '$1==c && $2=="tar_zstd_ssh" {print $4}' "$OUT" | median)" %.3f)"
	done
	printf '\nevery run, in order (time ms):\n'
	for c in $CASES; do
		for t in rsync gpurun scp tar_zstd_ssh; do
			grep -q "^$c $t " "$OUT" || continue
			printf '%-9s %-13s %s\n' "$c" "$t" \
				"$(awk -v c="$c" -v t="$t" '$1==c && $2==t {printf "%s ", $3}' "$OUT")"
		done
	done
	printf '\n(x peer: against rsync in the same run; medians of %s runs; host KiB: gpurun-agent, rsync --server)\n' "$RUNS"
	printf 'tree copies on: %s\n' "$(fs_said)"
	printf 'targets: big1 and bigregen time <= 1.0 scp; bigedit time and bytes <= 1.0, cpu <= 1.5; tree <= 1.0 rsync and <= 1.2 tar|zstd|ssh;\n'
	printf '         peak RSS <= 64 MiB (65536 KiB) for any file size, <= 64 MiB + 150 B/file for trees (100k files: 80 MiB)\n'
}

command -v rsync >/dev/null && command -v zstd >/dev/null && [ -x /usr/bin/time ] ||
	{ say "bench_big: needs rsync, zstd and /usr/bin/time"; exit 1; }
start_sshd gpuhost || exit 1
trust_sshd gpuhost
start_proxy loopback "$SSHD_PORT_gpuhost" || exit 1
ssh_host_via vialo gpuhost "$PROXY_PORT_loopback"
start_proxy wan "$SSHD_PORT_gpuhost" 25 "$WAN_RATE" || exit 1
ssh_host_via viawan gpuhost "$PROXY_PORT_wan"
say "bench_big: cases $CASES; load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
rc=0
for c in $CASES; do
	say "== $c"
	"case_$c" || { say "case $c failed"; rc=1; }
done
report
unmount_all "$RH" # before test_done removes the scratch folder
[ "$rc" = 0 ] || test_failures=1 # keep the scratch folder
test_done
