#!/bin/bash
# Benchmark: gpurun sync against rsync -az over ssh, through the same delay
# proxy, on a synthetic ML project: thousands of small text files, a 100 MB
# incompressible dataset, a .gitignore (with ignored outputs present).
# Scenarios: first sync, no-op, small edit (one line in 20 files + 1 MiB
# changed in the middle of the dataset). Profiles: loopback, and 50 ms
# round trip at 100 Mbit (25 ms each way, 12.5 MB/s). Time is wall clock of
# the whole command; bytes are counted by the proxy (both directions, ssh
# included). Each cell is the median of RUNS runs (default 4), the two
# tools in turn (rsync first in odd runs, gpurun first in even ones);
# "by run" is the median of the runs' own ratios.
#   tests/bench/bench_sync.sh            (make bench calls it)
#   RUNS=5 PROFILES=wan FILES=3000 tests/bench/bench_sync.sh
# BENCH_RAW=1 prints every run as it ends.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"

RUNS=${RUNS:-4}
FILES=${FILES:-3000}
PROFILES=${PROFILES:-"loopback wan"}
WAN_RATE=12500000 # bytes/s each way: 100 Mbit
WAN_DELAY_MS=25    # each way: a round trip of 50 ms
P=$TRASH/proj
OUT=$TRASH/results
: >"$OUT"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

make_project() {
	python3 - "$P" "$FILES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(42)
words = ['model', 'loss', 'grad', 'batch', 'layer', 'self', 'tensor', 'optim', 'step',
         'epoch', 'config', 'data', 'return', 'import', 'torch', 'np', 'lr', 'weight']
for i in range(n):
    d = os.path.join(root, 'src', 'pkg%02d' % (i % 60), 'mod%d' % (i % 7))
    os.makedirs(d, exist_ok=True)
    lines = []
    for j in range(rnd.randint(20, 200)):
        lines.append('    ' * rnd.randint(0, 3) + ' '.join(rnd.choice(words) + str(rnd.randint(0, 999))
                     for _ in range(rnd.randint(2, 9))) + '\n')
    open(os.path.join(d, 'file%04d.py' % i), 'w').writelines(lines)
# ignored outputs that must not travel
os.makedirs(os.path.join(root, 'runs', 'exp1'), exist_ok=True)
os.makedirs(os.path.join(root, 'src', '__pycache__'), exist_ok=True)
for i in range(200):
    open(os.path.join(root, 'src', '__pycache__', 'm%d.pyc' % i), 'wb').write(os.urandom(2000))
open(os.path.join(root, 'runs', 'exp1', 'ckpt.bin'), 'wb').write(os.urandom(20 << 20))
open(os.path.join(root, '.gitignore'), 'w').write('__pycache__/\n*.pyc\nruns/\n*.log\n')
os.makedirs(os.path.join(root, 'data'), exist_ok=True)
open(os.path.join(root, 'data', 'train.bin'), 'wb').write(os.urandom(100 * 1000 * 1000))
PY
}

# small_edit K: one line changed in 20 files, 1 MiB changed mid-dataset.
small_edit() {
	python3 - "$P" "$1" <<'PY'
import os, sys
root, k = sys.argv[1], int(sys.argv[2])
files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(root, 'src'))
               for f in fs if f.endswith('.py'))
for f in files[k * 20:(k + 1) * 20]:
    lines = open(f).readlines()
    lines[len(lines) // 2] = 'edited_line = %d\n' % k
    open(f, 'w').writelines(lines)
with open(os.path.join(root, 'data', 'train.bin'), 'r+b') as f:
    f.seek(50 * 1000 * 1000 + k * 4096)
    f.write(os.urandom(1 << 20))
PY
}

# run_rsync HOST [DST]
run_rsync() {
	rsync -az --filter=':- .gitignore' --exclude=/.gpurun/ --exclude=/gpurun.ini \
		-e "ssh -F $HOME/.ssh/config -o BatchMode=yes" "$P/" "$1:$TRASH/gpuhost-home/${2:-rsync-dst}/"
}

# gpurun's sync returns with the copy durable on the host (the README's
# "made durable, then the renames"); rsync's returns with it in the host's
# page cache. The durable peer: rsync, then one syncfs of its copy's file
# system (a new one each run, holding only that copy).
run_rsync_durable() {
	run_rsync "$1" rsyncd-dst && sync -f "$TRASH/gpuhost-home/rsyncd-dst/"
}

run_gpurun() {
	(cd "$P" && "$GPURUN" -q sync --yes)
}

# measure NAME CMD...: run once, append "NAME ms bytes" to $OUT. Each
# command starts with nothing left to write back on the filesystem (both
# copies live on the same one): neither tool pays for the other's writes.
measure() {
	_name=$1
	shift
	sync
	sleep 0.3
	[ -z "${BUSY:-}" ] || busy_writer "$BUSY"
	_b0=$(proxy_bytes "$PROXY")
	_t0=$(now_ms)
	if ! "$@" >/dev/null 2>"$TRASH/cmd.err"; then
		say "$PROFILE $_name failed:"
		head -5 "$TRASH/cmd.err" >&2
		echo "$PROFILE $_name failed failed" >>"$OUT" # the cell says so
		FAILED=1
		return 1
	fi
	_t1=$(now_ms)
	sleep 0.3 # the proxy writes its counters every 100 ms and at a close
	_b1=$(proxy_bytes "$PROXY")
	echo "$PROFILE $_name $((_t1 - _t0)) $((_b1 - _b0))" >>"$OUT"
	[ -z "${BENCH_RAW:-}" ] || say "$PROFILE $_name $((_t1 - _t0)) ms $((_b1 - _b0)) B"
}

# Each first sync's copy lands on a new file system (fresh_fs,
# bench_lib.sh), or with BENCH_FS=plain in a new folder, the previous
# copies moved aside, not deleted: on ext4, files created within a minute
# of a mass deletion make the inode allocator step over every freshly
# freed inode (recently_deleted() in a profile), which slowed both tools'
# first sync by 20-60% here; a first sync to a real host does not follow
# one. They go when the bench ends.
fs_setup "$TRASH/gpuhost-home"
fresh_remote() {
	_old=$TRASH/old/$(date +%s%N)
	mkdir -p "$_old"
	for _d in rsync-dst rsyncd-dst gp-dst; do
		[ ! -e "$TRASH/gpuhost-home/$_d" ] || mountpoint -q "$TRASH/gpuhost-home/$_d" ||
			mv "$TRASH/gpuhost-home/$_d" "$_old/"
	done
	fresh_fs "$TRASH/gpuhost-home" rsync-dst rsyncd-dst gp-dst || return 1
	rm -rf "$P/.gpurun/remote-"* "$P/.gpurun/sigs" "$P/.gpurun/index"
	mkdir -p "$TRASH/gpuhost-home/gp-dst" # (exec needs it; sync would make it)
}

# busy_writer DST: another writer on the host's disk, as a running job
# saving a checkpoint is: BUSY_MB of data written into DST's file system
# and left for the kernel to write back (the busy scenario, loopback only).
BUSY_MB=${BUSY_MB:-512}
busy_writer() {
	head -c "$((BUSY_MB << 20))" /dev/zero >"$TRASH/gpuhost-home/$1/.busy-writer"
}

first_rsync() { measure first-rsync run_rsync "$host"; }
first_gpurun() { measure first-gpurun run_gpurun; }
first_rsyncd() { measure first-rsyncd run_rsync_durable "$host"; }
noop_rsync() { measure noop-rsync run_rsync "$host"; }
noop_gpurun() { measure noop-gpurun run_gpurun; }
busy_rsync() { BUSY=rsync-dst measure busy-rsync run_rsync "$host"; }
busy_gpurun() { BUSY=gp-dst measure busy-gpurun run_gpurun; }
busy_rsyncd() { BUSY=rsyncd-dst measure busy-rsyncd run_rsync_durable "$host"; }
edit_rsync() { measure edit-rsync run_rsync "$host"; }
edit_gpurun() { measure edit-gpurun run_gpurun; }

# Each scenario runs the tools in turn (in_turn: rsync first in odd runs,
# gpurun first in even ones; on loopback the first and busy syncs have the
# durable rsync as a third): use an even RUNS.
bench_profile() {
	PROFILE=$1 PROXY=$1
	local host=via$1 i
	write_ini "$P" "$host" "$TRANSPORT" gp-dst
	fresh_remote || return 1
	"$GPURUN" -C "$P" exec true >/dev/null || return 1 # the agent is uploaded once
	for i in $(seq 1 "$RUNS"); do
		fresh_remote || return 1
		if [ "$1" = loopback ]; then
			in_turn "$i" first_rsync first_gpurun first_rsyncd
		else # link-bound: the host's flush is lost in the transfer
			in_turn "$i" first_rsync first_gpurun
		fi
	done
	for i in $(seq 1 "$RUNS"); do
		in_turn "$i" noop_rsync noop_gpurun
	done
	if [ "$1" = loopback ]; then
		for i in $(seq 1 "$RUNS"); do
			fresh_remote || return 1
			in_turn "$i" busy_rsync busy_gpurun busy_rsyncd
		done
		rm -f "$TRASH"/gpuhost-home/{rsync,rsyncd,gp}-dst/.busy-writer
	fi
	measure conn-gpurun "$GPURUN" -C "$P" exec true
	# gpurun's own frames in a no-op (its --stats count, headers included)
	(cd "$P" && "$GPURUN" sync --stats 2>/dev/null) |
		sed -n "s/^wire: \([0-9]*\) bytes.*/$PROFILE frames-noop 0 \1/p" >>"$OUT"
	for i in $(seq 1 "$RUNS"); do
		small_edit "$((i + ${EDIT_BASE:-0}))"
		in_turn "$i" edit_rsync edit_gpurun
	done
	EDIT_BASE=$((${EDIT_BASE:-0} + RUNS))
	# the copies must be equal, or the numbers mean nothing
	tree_sig "$TRASH/gpuhost-home/gp-dst" gpurun.ini >"$TRASH/a.sig"
	tree_sig "$TRASH/gpuhost-home/rsync-dst" >"$TRASH/b.sig"
	cmp -s "$TRASH/a.sig" "$TRASH/b.sig" || { say "gpurun's and rsync's copies differ:"; diff "$TRASH/a.sig" "$TRASH/b.sig" | head -5 >&2; return 1; }
}

cell() { awk -v p="$1" -v n="$2" -v f="$3" '$1==p && $2==n {print $f}' "$OUT" | median; }
# run_ratio PROF A B: the median over runs of A's time / B's in the same
# run (the k-th of each), which a machine that drifts during the bench
# moves less than the ratio of the medians does.
run_ratio() {
	awk -v p="$1" -v a="$2" -v b="$3" '$1 == p && $2 == a { x[++na] = $3 } $1 == p && $2 == b { y[++nb] = $3 }
		END {
			for (i = 1; i <= na && i <= nb; i++) {
				if (x[i] !~ /^[0-9]+$/ || y[i] !~ /^[0-9]+$/ || y[i] == 0) { print "failed"; exit }
				r[++n] = x[i] / y[i]
			}
			if (!n) { print "failed"; exit }
			asort(r)
			printf "%.2f\n", n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
		}' "$OUT"
}

report() {
	printf '\n%-9s %-11s %10s %10s %7s %7s %12s %12s %7s\n' profile scenario "rsync ms" "gpurun ms" ratio \
		"by run" "rsync B" "gpurun B" ratio
	for prof in $PROFILES; do
		for sc in first busy noop edit; do
			[ "$sc" != busy ] || grep -q "^$prof busy-" "$OUT" || continue
			rt=$(cell "$prof" "$sc-rsync" 3) gt=$(cell "$prof" "$sc-gpurun" 3)
			rb=$(cell "$prof" "$sc-rsync" 4) gb=$(cell "$prof" "$sc-gpurun" 4)
			printf '%-9s %-11s %10s %10s %7s %7s %12s %12s %7s\n' "$prof" "$sc" "$rt" "$gt" \
				"$(ratio "$gt" "$rt")" "$(run_ratio "$prof" "$sc-gpurun" "$sc-rsync")" \
				"$rb" "$gb" "$(ratio "$gb" "$rb" %.3f)"
		done
		for sc in first busy; do
			grep -q "^$prof $sc-rsyncd " "$OUT" || continue
			rt=$(cell "$prof" "$sc-rsyncd" 3) gt=$(cell "$prof" "$sc-gpurun" 3)
			printf '%-9s %s sync against a durable copy (rsync -az, then syncfs of its file system): %s ms; gpurun %s ms = %s x (by run %s)\n' \
				"$prof" "$sc" "$rt" "$gt" "$(ratio "$gt" "$rt")" "$(run_ratio "$prof" "$sc-gpurun" "$sc-rsyncd")"
		done
		if [ "$prof" = wan ]; then
			# What the link alone needs for the bytes gpurun sent, with
			# no connection set-up at all: no tool beats it.
			rt=$(cell "$prof" first-rsync 3) gb=$(cell "$prof" first-gpurun 4)
			printf '%-9s first sync floor: %s B at %s B/s = %s ms = %s x rsync'"'"'s time\n' "$prof" \
				"$gb" "$WAN_RATE" "$(ratio "$gb" "$((WAN_RATE / 1000))" %.0f)" \
				"$(ratio "$(ratio "$gb" "$((WAN_RATE / 1000))" %.3f)" "$rt")"
			# The target: that floor, plus the set-up (the no-op sync's
			# time), plus one round trip.
			gt=$(cell "$prof" first-gpurun 3) nt=$(cell "$prof" noop-gpurun 3)
			awk -v p="$prof" -v b="$gb" -v r="$WAN_RATE" -v n="$nt" -v rtt="$((2 * WAN_DELAY_MS))" -v g="$gt" 'BEGIN {
				if (b !~ /^[0-9]+$/ || n !~ /^[0-9]+$/ || g !~ /^[0-9]+$/) { printf "%-9s first sync allowance: failed\n", p; exit }
				a = b * 1000 / r + n + rtt
				printf "%-9s first sync allowance: floor + set-up (the no-op, %d ms) + one round trip (%d ms) = %.0f ms; gpurun %d ms, %+.0f ms (%+.1f%%)\n",
					p, n, rtt, a, g, g - a, (g - a) * 100 / a }'
		fi
		cb=$(cell "$prof" conn-gpurun 4)
		nb=$(cell "$prof" noop-gpurun 4)
		printf '%-9s no-op: %s B of sync frames; %s B through the proxy, %s B beyond a bare connection (gpurun exec true: %s B)\n' \
			"$prof" "$(cell "$prof" frames-noop 4)" "$nb" \
			"$(awk -v a="$nb" -v b="$cb" 'BEGIN{ if (a ~ /^[0-9]+$/ && b ~ /^[0-9]+$/) print a - b; else print "failed" }')" "$cb"
	done
	printf '\nbusy: a first sync while %s MiB written by another process waits for write-back on the host'"'"'s file system\n' "$BUSY_MB"
	printf 'targets (gpurun/rsync): no-op <= 0.40 time and <= 2 KB beyond the connection; small edit <= 0.60 time and <= 1.0 bytes; first <= 0.90 time\n'
	printf 'transport: %s; %s runs per cell (median); %s source files + 100 MB dataset\n' \
		"$TRANSPORT" "$RUNS" "$FILES"
	printf 'copies on: %s\n' "$(fs_said)"
}

# bench_ab.sh takes the definitions above and runs its own rounds.
[ -z "${BENCH_SYNC_DEFS_ONLY:-}" ] || return 0

start_sshd gpuhost || exit 1
trust_sshd gpuhost
make_project
# libssh2 (the default) when it is built, else an ssh subprocess.
TRANSPORT=${TRANSPORT:-}
if [ -z "$TRANSPORT" ]; then
	write_ini "$P" gpuhost libssh2 gp-dst
	mkdir -p "$TRASH/gpuhost-home/gp-dst"
	if "$GPURUN" -C "$P" exec true >/dev/null 2>&1; then TRANSPORT=libssh2; else TRANSPORT=openssh; fi
fi
for prof in $PROFILES; do
	case $prof in
	loopback) start_proxy loopback "$SSHD_PORT_gpuhost" ;;
	wan) start_proxy wan "$SSHD_PORT_gpuhost" "$WAN_DELAY_MS" "$WAN_RATE" ;;
	*) say "unknown profile $prof"; exit 1 ;;
	esac
	eval "ssh_host_via via$prof gpuhost \$PROXY_PORT_$prof"
	say "== profile $prof"
	bench_profile "$prof" || { say "profile $prof failed"; FAILED=1; }
done
report
unmount_all "$TRASH/gpuhost-home" # before test_done removes the scratch folder
[ -z "${FAILED:-}" ] || test_failures=1 # a failed run fails the bench (the table says which)
test_done
