#!/bin/bash
# Benchmark: gpurun pull of one large checkpoint against scp and rsync of
# the same file over the same sshd on loopback, in the same run. Cases:
# first pull of an incompressible file (SIZE_MB, default 1024; beside scp
# also scp followed by a sync of the file, as durable as gpurun's pull), then the
# same file with 10 % of it rewritten in place (gpurun: delta against the
# copy in runs/; rsync: its own delta against its copy; scp: whole).
# Each line: wall seconds, bytes through the proxy (both ways, ssh
# included), peak RSS of the client and of the far side (the agent and
# its helpers; sshd's session child for scp/rsync is not counted: their
# remote peer is scp/rsync, measured the same way). Medians of RUNS runs
# (default 3), interleaved. The relay rows: the first pull, `exec cat`
# of the file (down) and `exec` reading it on stdin (up), each through
# the connection holder ([remote] persist; gpurun_first as the
# environment says, the default is held) and on a connection of its own
# (persist = 0), beside scp / ssh cat, with the holder's peak RSS (its
# VmHWM, reset before each run). RELAY=0 leaves out the exec rows.
#   tests/bench/bench_pull.sh                (make bench calls it)
#   RUNS=5 SIZE_MB=256 TRANSPORT=openssh tests/bench/bench_pull.sh
#   BENCH_BIG=1: also a 20 GiB sparse checkpoint (memory only, gpurun alone)
. "$(dirname "$0")/../lib.sh"

RUNS=${RUNS:-3}
SIZE_MB=${SIZE_MB:-1024}
TRANSPORT=${TRANSPORT:-libssh2}
P=$TRASH/proj
RH=$TRASH/gpuhost-home
OUT=$TRASH/results
: >"$OUT"

median() { sort -n | awk '{a[NR]=$1} END{if (!NR) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
now_ns() { date +%s%N; }

start_sshd gpuhost || exit 1
trust_sshd gpuhost
start_proxy lo "$SSHD_PORT_gpuhost" 0 && ssh_host_via vialo gpuhost "$PROXY_PORT_lo"
SSHCFG=$HOME/.ssh/config
mkdir -p "$P"
write_ini "$P" vialo "$TRANSPORT" proj
printf '[build]\ncommand =\n[artifacts]\npull = ckpt.bin\n[train]\ncommand = true\n' >>"$P/gpurun.ini"
id=$(cd "$P" && "$GPURUN" -q train --detach) || { say "train failed"; exit 1; }
(cd "$P" && "$GPURUN" -q logs -f "$id" >/dev/null 2>&1)
jd=$(ls -d "$RH"/.cache/gpurun/jobs/*/"$id") || exit 1

# The agent runs under /usr/bin/time so its peak RSS (and its helpers',
# which it waits for) is known: its cached binary is wrapped.
agent_wrap "$RH" /usr/bin/time -f %M -o "$TRASH/agent-rss" || exit 1
holder_pid() { cat "$XDG_RUNTIME_DIR"/gpurun/*.pid 2>/dev/null | head -n1; }

# rss_run NAME CMD...: run it, append "NAME secs bytes client_kb agent_kb
# rc holder_kb" (holder_kb: the connection holder's peak during the run).
# Each starts with nothing dirty in the page cache: scp and rsync do not
# fsync, and the run after theirs paid for writing their 256 MiB back
# (gpurun, which fsyncs inside its time, went 1.9 s against 1.6 s after
# scp, 1.55 s against 1.55 s after a sync; bench_big.sh and bench_sync.sh
# sync the same way).
rss_run() {
	_name=$1; shift
	rm -f "$TRASH/agent-rss"
	sync
	sleep 0.3
	_hp=$(holder_pid)
	[ -z "$_hp" ] || echo 5 >"/proc/$_hp/clear_refs" 2>/dev/null || _hp=
	_b0=$(proxy_bytes lo)
	_t0=$(now_ns)
	/usr/bin/time -f %M -o "$TRASH/client-rss" "$@" >/dev/null 2>"$TRASH/run.err"
	_rc=$?
	_t1=$(now_ns)
	sleep 0.2
	_b1=$(proxy_bytes lo)
	_a=$(tail -n1 "$TRASH/agent-rss" 2>/dev/null || echo 0)
	_h=$([ -z "$_hp" ] || awk '/^VmHWM/ {print $2}' "/proc/$_hp/status" 2>/dev/null)
	echo "$_name $(awk -v a="$_t0" -v b="$_t1" 'BEGIN{printf "%.2f", (b-a)/1e9}') $((_b1 - _b0)) $(tail -n1 "$TRASH/client-rss") ${_a:-0} $_rc ${_h:-0}" >>"$OUT"
	[ "$_rc" = 0 ] || { say "$_name failed:"; cat "$TRASH/run.err" >&2; }
}

# ckpt: a fresh incompressible checkpoint in the job folder.
head -c $((SIZE_MB << 20)) /dev/urandom >"$jd/ckpt.bin"
SRC=vialo:$jd/ckpt.bin

pull_first() { rm -rf "$P/runs"; rss_run "$1" sh -c "cd '$P' && exec '$GPURUN' -q pull $id"; }
direct_first() {
	rm -rf "$P/runs"
	rss_run "$1" sh -c "cd '$P' && GPURUN_REMOTE_PERSIST=0 exec '$GPURUN' -q pull $id"
}
scp_first() { rm -f "$TRASH/scp.bin"; rss_run "$1" scp -O -q -F "$SSHCFG" "$SRC" "$TRASH/scp.bin"; }
rsync_first() { rm -f "$TRASH/rsync.bin"; rss_run "$1" rsync -a -e "ssh -F $SSHCFG" "$SRC" "$TRASH/rsync.bin"; }
# scp made as durable as gpurun's pull (which fsyncs before the rename):
# the file synced before the time stops.
scp_sync_first() {
	rm -f "$TRASH/scp.bin"
	rss_run "$1" sh -c "scp -O -q -F '$SSHCFG' '$SRC' '$TRASH/scp.bin' && exec sync '$TRASH/scp.bin'"
}

# Which tool goes first turns from round to round: on a VM that hands free
# memory back to its host, the first writer after a while pays for cold
# pages (see bench_big.sh).
set -- pull_first:gpurun_first scp_first:scp_first rsync_first:rsync_first scp_sync_first:scp_sync_first \
	direct_first:direct_first
for i in $(seq 1 "$RUNS"); do
	for k in $(seq 0 $(($# - 1))); do
		eval "t=\${$(( (i + k - 1) % $# + 1 ))}"
		"${t%%:*}" "${t#*:}"
	done
done
cmp "$jd/ckpt.bin" "$P/runs/$id/ckpt.bin" || say "pulled checkpoint differs"

# The relay rows' exec cases: the checkpoint down (exec cat) and up
# (on exec's stdin), held, direct and by ssh, in turn.
exec_down() { rss_run "$1" sh -c "cd '$P' && GPURUN_REMOTE_PERSIST=$2 exec '$GPURUN' -q exec -n cat '$jd/ckpt.bin'"; }
exec_up() { rss_run "$1" sh -c "cd '$P' && GPURUN_REMOTE_PERSIST=$2 exec '$GPURUN' -q exec sh -c 'cat >/dev/null' <'$jd/ckpt.bin'"; }
ssh_down() { rss_run "$1" ssh -F "$SSHCFG" vialo cat "$jd/ckpt.bin"; }
ssh_up() { rss_run "$1" sh -c "exec ssh -F '$SSHCFG' vialo 'cat >/dev/null' <'$jd/ckpt.bin'"; }
if [ "${RELAY:-1}" = 1 ]; then
	set -- "ssh_down ssh_cat" "exec_down held_cat 10m" "exec_down direct_cat 0" \
		"ssh_up ssh_stdin" "exec_up held_stdin 10m" "exec_up direct_stdin 0"
	for i in $(seq 1 "$RUNS"); do
		for k in 0 1 2; do
			eval "t=\${$(( (i + k - 1) % 3 + 1 ))}"
			$t
		done
		for k in 0 1 2; do
			eval "t=\${$(( (i + k - 1) % 3 + 4 ))}"
			$t
		done
	done
fi

# Changed in place: 10 % of it, in 10 spread pieces (as an optimizer
# rewriting some layers); each run changes it again from the copies the
# previous pull left.
change() {
	python3 - "$jd/ckpt.bin" "$1" <<'PY'
import os, random, sys
p, seed = sys.argv[1], int(sys.argv[2])
n = os.path.getsize(p)
r = random.Random(seed)
with open(p, 'r+b') as f:
    for k in range(10):
        off = (n // 10) * k + r.randrange(0, n // 20)
        f.seek(off)
        f.write(os.urandom(n // 100))
PY
}
rsync_first rsync_first
for i in $(seq 1 "$RUNS"); do
	change "$i"
	rss_run gpurun_changed sh -c "cd '$P' && exec '$GPURUN' -q pull $id"
	rss_run rsync_changed rsync -a --no-whole-file -e "ssh -F $SSHCFG" "$SRC" "$TRASH/rsync.bin"
	rss_run scp_changed scp -O -q -F "$SSHCFG" "$SRC" "$TRASH/scp.bin"
done
cmp "$jd/ckpt.bin" "$P/runs/$id/ckpt.bin" || say "pulled checkpoint differs after the change"

col() { awk -v n="$1" -v c="$2" '$1==n && $6==0 {print $c}' "$OUT" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a=="nan"||b=="nan"||b==0) print "n/a"; else printf "%.2fx", a/b}'; }
printf '\npull of a %s MiB incompressible checkpoint, loopback, transport %s (median of %s; load: %s)\n' \
	"$SIZE_MB" "$TRANSPORT" "$RUNS" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %8s %12s %12s %12s %7s\n' case secs bytes client_MiB remote_MiB failed
for n in gpurun_first direct_first scp_first scp_sync_first rsync_first gpurun_changed rsync_changed scp_changed; do
	printf '%-16s %8s %12s %12s %12s %7s\n' "$n" "$(col $n 2)" "$(col $n 3)" \
		"$(awk -v k="$(col $n 4)" 'BEGIN{printf "%.1f", k/1024}')" \
		"$(awk -v k="$(col $n 5)" 'BEGIN{printf "%.1f", k/1024}')" \
		"$(awk -v n="$n" '$1==n && $6!=0' "$OUT" | wc -l)"
done
for n in gpurun_first direct_first scp_first scp_sync_first rsync_first; do
	printf '%-16s every run: %s\n' "$n" "$(awk -v n="$n" '$1==n {printf "%s%s", s, $2; s=", "}' "$OUT")"
done
echo "time  gpurun/scp first: $(ratio "$(col gpurun_first 2)" "$(col scp_first 2)")  (target <= 1.11x: >= 0.9x scp's speed)"
echo "time  gpurun/(scp + sync of the file) first: $(ratio "$(col gpurun_first 2)" "$(col scp_sync_first 2)")  (as durable as gpurun's pull)"
echo "bytes gpurun/rsync changed: $(ratio "$(col gpurun_changed 3)" "$(col rsync_changed 3)")  (target <= 1.2x)"
echo "time  gpurun/rsync changed: $(ratio "$(col gpurun_changed 2)" "$(col rsync_changed 2)")  (target <= 1.0x)"
echo "(remote_MiB: peak RSS of gpurun-agent and its helpers; of the scp/rsync peer it is not measured: 0)"

# relay_row NAME PEER DIRECT: MB/s, peak RSS of the client and of the
# holder, and the time against the peer's and the direct row's.
mbs() { awk -v t="$1" -v s="$SIZE_MB" 'BEGIN{if (t=="nan"||t==0) print "n/a"; else printf "%.0f", s*1.048576/t}'; }
relay_row() {
	printf '%-14s %7s %6s %10s %10s %9s %11s\n' "$1" "$(col "$1" 2)" "$(mbs "$(col "$1" 2)")" \
		"$(awk -v k="$(col "$1" 4)" 'BEGIN{printf "%.1f", k/1024}')" \
		"$(case $1 in held_* | gpurun_first) awk -v k="$(col "$1" 7)" 'BEGIN{printf "%.1f", k/1024}' ;; *) echo - ;; esac)" \
		"${2:+$(ratio "$(col "$1" 2)" "$(col "$2" 2)")}" "${3:+$(ratio "$(col "$1" 2)" "$(col "$3" 2)")}"
}
printf '\nrelay: %s MiB through the connection holder against a connection of its own (persist = 0) and the peer\n' "$SIZE_MB"
printf '%-14s %7s %6s %10s %10s %9s %11s\n' case secs MB/s client_MiB holder_MiB vs_peer vs_direct
relay_row scp_first
relay_row direct_first scp_first
relay_row gpurun_first scp_first direct_first
if [ "${RELAY:-1}" = 1 ]; then
	relay_row ssh_cat
	relay_row direct_cat ssh_cat
	relay_row held_cat ssh_cat direct_cat
	relay_row ssh_stdin
	relay_row direct_stdin ssh_stdin
	relay_row held_stdin ssh_stdin direct_stdin
fi
echo "(gpurun_first: through the holder unless GPURUN_REMOTE_PERSIST=0 is set; holder_MiB: its VmHWM, reset before each run; vs_direct target <= 1.05x)"

if [ "${BENCH_BIG:-0}" = 1 ]; then
	: >"$OUT"
	rm -f "$jd/ckpt.bin"
	truncate -s 20G "$jd/ckpt.bin"
	pull_first gpurun_sparse20g
	printf '\n20 GiB sparse checkpoint: %s\n' "$(cat "$OUT")"
	rm -rf "$jd/ckpt.bin" "$P/runs"
fi
test_done
